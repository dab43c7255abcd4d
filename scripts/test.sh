#!/usr/bin/env bash
# The test command of the README: installs dependencies, builds, takes screenshots of the real
# window under Xvfb on each bundled sample (out/screenshots/), runs every test, then the C++
# tests and a short run of each fuzzer built with AddressSanitizer and UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/build.sh
scripts/screenshots.sh out/screenshots
(cd build && ctest --output-on-failure -j"$(nproc)")
scripts/sanitize.sh
