#!/usr/bin/env bash
# The whole GPU check in one command, on a machine with an NVIDIA GPU: builds ttrace (or takes
# the programs of scripts/gpu-bundle.sh), runs the CUDA backend's tests on the device (none may
# be skipped), the kernel benchmark, the end-to-end benchmark and the capture's cost on a
# training step, and writes one Markdown results file, to be recorded in docs/performance.md
# with the machine.
# Usage: scripts/gpu-check.sh [RESULTS_FILE]   (default: gpu-check-results.md)
#   TTRACE_GPU_BUNDLE=DIR  the programs and libraries scripts/gpu-bundle.sh packed into DIR,
#                          instead of a build: for a machine without the build's Debian
#                          packages (the device tool's)
#   TTRACE_GPU_CHECK_GB=N  size of the end-to-end trace set (default 4)
# Exits 0 when every step passed; each step's outcome is in the results file either way.
set -uo pipefail
cd "$(dirname "$0")/.."
results=${1:-gpu-check-results.md}
mkdir -p "$(dirname "$results")"
if [ -n "${TTRACE_GPU_BUNDLE:-}" ]; then
    unpacked=${TMPDIR:-/tmp}/ttrace-gpu-bundle
    rm -rf "$unpacked"
    mkdir -p "$unpacked"
    tar -C "$unpacked" -xJf "$TTRACE_GPU_BUNDLE/ttrace-gpu.tar.xz" ||
        { echo "gpu-check: cannot unpack $TTRACE_GPU_BUNDLE/ttrace-gpu.tar.xz" >&2; exit 1; }
    bin=$unpacked/bin
    export LD_LIBRARY_PATH="$unpacked/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
    scripts/build.sh >&2 || { echo "gpu-check: the build failed" >&2; exit 1; }
    bin=build-gpu-check
    mkdir -p "$bin"
    for program in app/ttrace-check app/ttrace-hdf5-worker tests/test_gpu_backend \
                   bench/bench_compare bench/bench_cuda_kernels; do
        ln -sf "$PWD/build/$program" "$bin/"
    done
fi
bin=$(cd "$bin" && pwd)
export TTRACE_SOURCE_DIR=$PWD TTRACE_CHECK=$bin/ttrace-check
export TTRACE_HDF5_WORKER=$bin/ttrace-hdf5-worker QT_QPA_PLATFORM=offscreen
export TTRACE_CACHE_DIR=${TMPDIR:-/tmp}/ttrace-gpu-check-cache
failed=0
step() {  # step TITLE COMMAND...: runs it, appends its output to the results
    local title=$1
    shift
    echo "gpu-check: $title" >&2
    local output status
    output=$("$@" 2>&1)
    status=$?
    {
        echo "## $title"
        echo
        if [ $status -ne 0 ]; then echo "**FAILED (exit $status)**"; echo; fi
        echo "$output"
        echo
    } >>"$results"
    [ $status -eq 0 ] || failed=1
}
py=${TTRACE_PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=python3
# listed_tests LINES SKIPPED COMMAND...: runs a test program, lists the lines matching LINES
# and fails when one matches SKIPPED: on a GPU machine a skipped test means the device, or the
# path that needs it, was not used.
listed_tests() {
    local lines=$1 skipped=$2
    shift 2
    local log
    log=$("$@" 2>&1)
    local status=$?
    echo '```'
    echo "$log" | grep -E "$lines" || true
    echo '```'
    if echo "$log" | grep -qE "$skipped"; then return 3; fi
    return $status
}
{
    echo "# ttrace GPU check"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | paste -sd ';')
    echo "- GPUs: ${gpus:-none (nvidia-smi found none)}"
    echo "- CPU: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
    echo
} >"$results"
step "CUDA backend against the CPU backend (tests/gpu/test_gpu_backend.cpp)" \
    listed_tests "^(PASS|FAIL|SKIP|QINFO|Totals)" "^SKIP" "$bin/test_gpu_backend"
step "Kernel throughput (bench/bench_cuda_kernels.cu)" "$bin/bench_cuda_kernels"
step "End to end (bench/run_gpu_bench.sh)" bench/run_gpu_bench.sh "$bin" "${TTRACE_GPU_CHECK_GB:-4}"
step "The capture on the GPU (python/tests/test_staging.py)" \
    listed_tests "(ok|FAIL|ERROR|skipped.*)$|^Ran |^OK|^FAILED" "skipped" \
    env PYTHONPATH=python "$py" -m unittest -v python/tests/test_staging.py
# A bf16 Llama of about 350M parameters on one GPU, with and without the capture of every
# iteration (3 a run, the first left out), against page-locked copy bandwidth.
step "Capture cost on one GPU (bench/capture_cost.py)" env PYTHONPATH=python "$py" \
    bench/capture_cost.py --device cuda --configs one-device --rounds 2 --iterations 3 -- \
    --dim 1024 --heads 16 --kv-heads 8 --ffn 2816 --layers 24 --vocab 32000 --seq 512 \
    --batch 2
echo "gpu-check: results in $results" >&2
exit $failed
