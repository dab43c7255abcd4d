#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs into ./gpu-bundle/ttrace-gpu.tar.xz (ignored by git), for a GPU machine
# that lacks the build's Debian packages, such as the one the device tool lends: the programs
# (built in ./build-gpu, without MPI, whose libraries would not travel) and every shared
# library they load that is not the C runtime's. On that machine:
#   TTRACE_GPU_BUNDLE=gpu-bundle scripts/gpu-check.sh RESULTS_FILE
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTTRACE_WERROR=ON \
      -DTTRACE_WITH_CUDA=ON -DTTRACE_WITH_MPI=OFF -DBUILD_TESTING=ON \
      -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >&2
programs=(app/ttrace-check app/ttrace-hdf5-worker tests/test_gpu_backend bench/bench_compare
          bench/bench_cuda_kernels)
cmake --build build-gpu -j"$(nproc)" --target "${programs[@]##*/}" >&2
# Staged in build-gpu/bundle, then packed: the libraries alone are about 65 MB, more than a
# device call carries (64 MiB); packed, about 20 MB.
stage=build-gpu/bundle
rm -rf "$stage" gpu-bundle
mkdir -p "$stage/bin" "$stage/lib" gpu-bundle
for program in "${programs[@]}"; do
    strip -o "$stage/bin/${program##*/}" "build-gpu/$program"
done
# Every library the programs load, but the C runtime's (the GPU machine has its own, newer).
ldd "$stage"/bin/* | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so' |
    while read -r library; do cp -L "$library" "$stage/lib/"; done
strip --strip-unneeded "$stage"/lib/* 2>/dev/null || true
tar -C "$stage" -cJf gpu-bundle/ttrace-gpu.tar.xz bin lib
du -h gpu-bundle/ttrace-gpu.tar.xz >&2
