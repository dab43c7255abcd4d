#!/usr/bin/env bash
# The test command of the README: installs dependencies, builds, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)"
