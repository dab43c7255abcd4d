#!/usr/bin/env bash
# Configures and builds ttrace in ./build (warnings are errors). CUDA is used when found.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTTRACE_WERROR=ON \
      -DPython3_EXECUTABLE="$PWD/.venv/bin/python" "$@"
cmake --build build -j"$(nproc)"
