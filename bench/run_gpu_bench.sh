#!/usr/bin/env bash
# End-to-end speed of the CUDA backend on one trace set, against the CPU backend and against
# merely reading the same datasets, all in this one run (bench_compare, page cache warm: the
# trace is read from memory, so what is left is the engine's own cost), then the CUDA backend
# by chunk size, with the bytes it copied to the device per element compared (stored words and
# scales, R's, P's and D's). Prints Markdown tables.
# Usage: bench/run_gpu_bench.sh BIN_DIR [GB]   (BIN_DIR holds bench_compare; default 4 GB)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1
gb=${2:-4}
runs=${TTRACE_BENCH_RUNS:-3}
data=${TTRACE_BENCH_DIR:-/tmp/ttrace-gpu-bench}
py=${TTRACE_PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=python3
dir="$data/${gb}gb"
[ -f "$dir/dist/manifest.json" ] || PYTHONPATH=python $py bench/make_bench_traces.py "$dir" --gb "$gb" >&2
files=("$dir"/dist/*.h5 "$dir"/ref/*.h5)
field() { $py -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A speeds=()
backend_name=""
device_bytes=""
for _ in $(seq "$runs"); do
    for mode in read cpu cuda; do
        cat "${files[@]}" >/dev/null
        if [ "$mode" = read ]; then
            line=$("$bin/bench_compare" read "$dir/dist" "$dir/ref")
        else
            line=$(TTRACE_BENCH_BACKEND=$mode "$bin/bench_compare" compare "$dir/dist" "$dir/ref")
            if [ "$mode" = cuda ]; then
                backend_name=$(echo "$line" | field backend)
                device_bytes=$(echo "$line" | $py -c "import json,sys; r = json.loads(sys.stdin.read()); print(f\"{r['bytes_to_device'] / max(r['elements'], 1):.2f} bytes per element compared, {r['bytes_to_device'] / max(r['bytes'], 1):.2f} per trace byte read\")")
            fi
        fi
        speeds[$mode]+="$(echo "$line" | field gb_per_s) "
    done
done
echo "End to end on ${gb} GB of trace (dist + ref + pert written; dist and ref read), warm page cache, $(nproc) cores, $backend_name; median of $runs rounds."
echo
echo "| mode | GB/s | ratio to read-only | ratio to the CPU backend |"
echo "|---|---|---|---|"
for mode in read cpu cuda; do
    $py -c "
import statistics
m, r, c = '${speeds[$mode]}'.split(), '${speeds[read]}'.split(), '${speeds[cpu]}'.split()
print(f'| ${mode} | {statistics.median(map(float, m)):.2f} | '
      f'{statistics.median(float(a) / float(b) for a, b in zip(m, r)):.2f} | '
      f'{statistics.median(float(a) / float(b) for a, b in zip(m, c)):.2f} |')"
done
echo
echo "Copied to the device by the CUDA backend: $device_bytes."
# The CUDA backend by chunk size (elements per block handed to the engine): 2^18 (the default,
# kDefaultChunkElements) to 2^24; one round each after the table's, the page cache warm.
echo
echo "The CUDA backend by chunk size ($(nproc) threads):"
echo
echo "| chunk (elements) | GB/s | ratio to the default, 2^18 |"
echo "|---|---|---|"
declare -A chunk_speeds=()
for shift in 18 20 22 24; do
    chunk=$((1 << shift))
    line=$(TTRACE_BENCH_BACKEND=cuda "$bin/bench_compare" compare "$dir/dist" "$dir/ref" "" \
        "$(nproc)" "$chunk")
    chunk_speeds[$shift]=$(echo "$line" | field gb_per_s)
done
for shift in 18 20 22 24; do
    $py -c "print(f'| 2^$shift | {${chunk_speeds[$shift]}:.2f} | {${chunk_speeds[$shift]} / ${chunk_speeds[18]}:.2f} |')"
done
