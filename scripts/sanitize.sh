#!/usr/bin/env bash
# Builds ttrace with AddressSanitizer and UBSan (clang; the `sanitize` preset of
# CMakePresets.json) in ./build-sanitize, and runs the C++ tests and a short run of every
# fuzzer there (labels unit and fuzz). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j"$(nproc)"
ctest --preset sanitize -j"$(nproc)" "$@"
