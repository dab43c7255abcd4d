#!/usr/bin/env bash
# The test command of the README: installs dependencies, builds, runs every test, then takes
# screenshots of the real window under Xvfb on each bundled sample (out/screenshots/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)")
scripts/screenshots.sh out/screenshots
