#!/usr/bin/env bash
# Comparison throughput and peak memory against two baselines measured in the same run:
# merely reading the same datasets, and a plain h5py+numpy script computing the same relative
# errors. All three read the distributed and reference sets only (the baseline has no
# perturbed reference), so they do the same work. Each size is measured with the traces in the
# page cache ("warm": reading is a memory copy) and, for sizes in TTRACE_BENCH_COLD (default:
# the first), evicted from it before every run ("cold": reading comes from the disk, as for a
# trace set larger than memory).
# Usage: bench/run_bench.sh [SIZES_GB...]   (default: 1 2; needs a built ./build)
# Prints one Markdown table; the numbers in docs/performance.md come from it.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 2)
data=${TTRACE_BENCH_DIR:-/tmp/ttrace-bench}
runs=${TTRACE_BENCH_RUNS:-3}
cold_sizes=${TTRACE_BENCH_COLD:-${sizes[0]}}
py=.venv/bin/python
bench=build/bench/bench_compare
# The CPU backend's figures, on a GPU machine too (bench/run_gpu_bench.sh measures CUDA).
export TTRACE_BENCH_BACKEND=${TTRACE_BENCH_BACKEND:-cpu}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { $py -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }

echo "| trace GB | page cache | mode | GB/s (median of $runs) | ratio to read-only (median of rounds) | peak RSS MB |"
echo "|---|---|---|---|---|---|"
cases=()
for gb in "${sizes[@]}"; do
    cases+=("$gb warm")
    for c in $cold_sizes; do
        if [ "$c" = "$gb" ]; then cases+=("$gb cold"); fi
    done
done
for case in "${cases[@]}"; do
    read -r gb cache <<<"$case"
    dir="$data/${gb}gb"
    [ -f "$dir/dist/manifest.json" ] || $py bench/make_bench_traces.py "$dir" --gb "$gb" >&2
    files=("$dir"/dist/*.h5 "$dir"/ref/*.h5)
    # every mode starts from the same state: all in memory, or nothing
    prepare() {
        if [ "$cache" = warm ]; then cat "${files[@]}" >/dev/null; else $py bench/evict_page_cache.py "${files[@]}"; fi
    }
    # Rounds of one run per mode, so that a machine that drifts (other load, the host's disk
    # cache) shifts every mode alike instead of the mode that happened to run last.
    declare -A speeds=() peaks=() speed=() rss=()
    for _ in $(seq "$runs"); do
        for mode in read compare baseline; do
            prepare
            if [ "$mode" = baseline ]; then
                line=$($py bench/h5py_numpy_baseline.py "$dir/dist" "$dir/ref")
            else
                line=$($bench "$mode" "$dir/dist" "$dir/ref")
            fi
            speeds[$mode]+="$(echo "$line" | field gb_per_s) "
            peaks[$mode]+="$(echo "$line" | field peak_rss_mb) "
        done
    done
    for mode in read compare baseline; do
        speed[$mode]=$(printf '%s\n' ${speeds[$mode]} | median)
        rss[$mode]=$(printf '%s\n' ${peaks[$mode]} | sort -g | tail -1)
    done
    for mode in read compare baseline; do
        # the median of the ratios within each round: steadier than a ratio of medians
        ratio=$($py -c "
import statistics
mode, read = '${speeds[$mode]}'.split(), '${speeds[read]}'.split()
print(f'{statistics.median(float(m) / float(r) for m, r in zip(mode, read)):.2f}')")
        printf '| %s | %s | %s | %.3f | %s | %.0f |\n' "$gb" "$cache" "$mode" "${speed[$mode]}" "$ratio" "${rss[$mode]}"
    done
    unset speeds peaks speed rss
done

# Opening a 10,000-tensor trace set: the index cache must make a re-open well under a second.
idx="$data/index-10k"
[ -f "$idx/manifest.json" ] || $py bench/make_index_traces.py "$idx" --tensors 10000 >&2
echo
echo "| index of 10,000 tensors | seconds |"
echo "|---|---|"
TTRACE_HDF5_WORKER=build/app/ttrace-hdf5-worker build/bench/bench_index "$idx" "$data/index-cache" |
    $py -c "
import json, sys
r = json.loads(sys.stdin.read())
print(f\"| first open, no cache | {r['uncached_s']:.3f} |\")
print(f\"| first open, filling the cache | {r['filling_cache_s']:.3f} |\")
print(f\"| re-open from the cache | {r['cached_s']:.3f} |\")
print(f\"| first open, no cache, HDF5 in a worker process | {r['isolated_uncached_s']:.3f} |\")
print(f\"| the same, {r['cores']} workers | {r['isolated_uncached_all_cores_s']:.3f} |\")"
