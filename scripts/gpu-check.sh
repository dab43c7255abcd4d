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
#   TTRACE_GPU_CHECK_SECONDS=N  the time the steps may take together (default 480: a device
#                          call is at most 10 minutes, and unpacking and starting take some)
# Each step has a share of that time; what a step leaves unused passes to the next, and a step
# that runs past its share is stopped and reported, so that the steps after it still run and
# every result reached is written. Exits 0 when every step passed; each step's outcome is in
# the results file either way.
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
budget=${TTRACE_GPU_CHECK_SECONDS:-480}
shares_total=480 # the shares below add up to this; they are scaled to the budget
allotted=0
# step SHARE TITLE COMMAND...: runs it within its share of the budget (in seconds out of
# shares_total, plus whatever the steps before it left), appends its output to the results
step() {
    local share=$1 title=$2
    shift 2
    allotted=$((allotted + share * budget / shares_total))
    local limit=$((allotted - SECONDS))
    ((limit > 10)) || limit=10
    echo "gpu-check: $title (at most $limit s)" >&2
    local output status began=$SECONDS
    # timeout signals the command's whole process group; a function runs in a bash of its own
    # (line-buffered, so that a stopped step's output so far is not lost in a buffer)
    output=$(timeout --kill-after=5 "$limit" stdbuf -oL -eL bash -c '"$@"' step "$@" 2>&1)
    status=$?
    local stopped=0
    # 124 or 137 past the limit: timeout's doing; 137 before it: killed otherwise (memory)
    if { [ $status -eq 124 ] || [ $status -eq 137 ]; } && ((SECONDS - began >= limit)); then
        stopped=1
        # a listing cut off inside its fence would fence in the rest of the file
        if (($(grep -c '^```' <<<"$output") % 2)); then output+=$'\n```'; fi
    fi
    {
        echo "## $title"
        echo
        if ((stopped)); then
            echo "**STOPPED after $limit s, its share of the ${budget} s budget; what it printed:**"
            echo
        elif [ $status -ne 0 ]; then
            echo "**FAILED (exit $status)**"
            echo
        fi
        echo "$output"
        echo
        echo "($((SECONDS - began)) s)"
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
    local log=${TMPDIR:-/tmp}/ttrace-gpu-check-listing status
    echo '```'
    "$@" 2>&1 | tee "$log" | grep --line-buffered -E "$lines"
    status=${PIPESTATUS[0]}
    echo '```'
    if grep -qE "$skipped" "$log"; then status=3; fi
    return "$status"
}
export -f listed_tests
export PYTHONUNBUFFERED=1
SECONDS=0 # the budget counts from here, after the build or the unpacking: the fixtures too
{
    echo "# ttrace GPU check"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | paste -sd ';')
    echo "- GPUs: ${gpus:-none (nvidia-smi found none)}"
    echo "- CPU: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
    # The test fixtures (partial sums, replicas, every layout, references laid out), which
    # test_gpu_backend also runs on the device where TTRACE_FIXTURES names them: CTest writes
    # them in a build, and a bundle has none, so they are written here, in seconds.
    fixtures=${TMPDIR:-/tmp}/ttrace-gpu-check-fixtures
    rm -rf "$fixtures"
    if fixtures_log=$(PYTHONPATH=python timeout 60 "$py" tests/data/make_fixtures.py "$fixtures" 2>&1); then
        export TTRACE_FIXTURES=$fixtures
        echo "- test fixtures: $(find "$fixtures" -mindepth 1 -maxdepth 1 -type d | wc -l) cases, in $fixtures ($SECONDS s)"
    else
        echo "- test fixtures: not written, so test_gpu_backend runs without them: $(echo "$fixtures_log" | tail -1)"
    fi
    echo
} >"$results"
step 90 "CUDA backend against the CPU backend (tests/gpu/test_gpu_backend.cpp)" \
    listed_tests "^(PASS|FAIL|SKIP|QINFO|Totals)" "^SKIP" "$bin/test_gpu_backend"
step 60 "Kernel throughput (bench/bench_cuda_kernels.cu)" "$bin/bench_cuda_kernels"
step 150 "End to end (bench/run_gpu_bench.sh)" bench/run_gpu_bench.sh "$bin" "${TTRACE_GPU_CHECK_GB:-4}"
step 30 "The capture on the GPU (python/tests/test_staging.py)" \
    listed_tests "(ok|FAIL|ERROR|skipped.*)$|^Ran |^OK|^FAILED" "skipped" \
    env PYTHONPATH=python "$py" -m unittest -v python/tests/test_staging.py
# A bf16 Llama of about 350M parameters on one GPU, with and without the capture of every
# iteration (3 a run, the first left out), against page-locked copy bandwidth.
step 150 "Capture cost on one GPU (bench/capture_cost.py)" env PYTHONPATH=python "$py" \
    bench/capture_cost.py --device cuda --configs one-device --rounds 2 --iterations 3 -- \
    --dim 1024 --heads 16 --kv-heads 8 --ffn 2816 --layers 24 --vocab 32000 --seq 512 \
    --batch 2
echo "All steps: $SECONDS s of a ${budget} s budget." >>"$results"
echo "gpu-check: results in $results" >&2
exit $failed
