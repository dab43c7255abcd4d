#!/usr/bin/env bash
# The distributed checker: speed-up per added MPI process, the time to open the index of a
# large synthetic TP x PP x DP trace set, and the time to build it with 1, 2 and 4 processes. Usage: bench/run_mpi_bench.sh [DP] [WIDTH]
# (defaults: DP 16, i.e. 8 x 8 x 16 = 1024 ranks of 16 tensors; WIDTH 64 hidden columns per
# tp rank). Needs a built ./build with MPI. Prints Markdown tables; docs/performance.md quotes
# them.
set -euo pipefail
cd "$(dirname "$0")/.."
dp=${1:-16}
width=${2:-64}
data=${TTRACE_BENCH_DIR:-/tmp/ttrace-bench}/mpi-dp$dp-w$width
runs=${TTRACE_BENCH_RUNS:-3}
py=.venv/bin/python
check=build/app/ttrace-check
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

if [ ! -f "$data/traces/dist/manifest.json" ]; then
    start=$(date +%s.%N)
    $py bench/make_synthetic_traces.py "$data/traces" --dp "$dp" --width "$width" >&2
    echo "generated $data/traces in $($py -c "print(f'{$(date +%s.%N) - $start:.1f}')") s" >&2
fi
ranks=$(ls "$data/traces/dist"/rank*.h5 | wc -l)
size=$(du -sm "$data/traces/dist" | cut -f1)
cat "$data"/traces/*/*.h5 >/dev/null  # every run reads from the page cache alike

echo "| index of $ranks rank files ($(($ranks * 16)) datasets) | threads | seconds |"
echo "|---|---|---|"
for threads in 1 2; do
    line=$(build/bench/bench_index "$data/traces/dist" "$data/index-cache" "$threads")
    $py -c "
import json
r = json.loads('$line')
print(f\"| first open, no cache | $threads | {r['uncached_s']:.2f} |\")
print(f\"| first open, filling the cache | $threads | {r['filling_cache_s']:.2f} |\")
print(f\"| re-open from the cache | $threads | {r['cached_s']:.2f} |\")"
done

# The index cache is filled once; each timed check then compares afresh (no stored results).
cache="$data/check-cache"
rm -rf "$cache"
$check "$data/traces/dist" "$data/traces/ref" --perturbed "$data/traces/pert" --cache-dir "$cache" \
    --quiet || [ $? -le 1 ]
echo
echo "| processes (1 thread each) | seconds (median of $runs) | speed-up |"
echo "|---|---|---|"
base=""
for np in 1 2 4; do
    times=()
    for _ in $(seq "$runs"); do
        # No stored results, nor tensors left by an interrupted run to resume from.
        rm -rf "$cache"/results.sqlite* "$cache"/unfinished
        command=("$check" "$data/traces/dist" "$data/traces/ref" --perturbed "$data/traces/pert"
                 --cache-dir "$cache" --threads 1 --quiet)
        [ "$np" -eq 1 ] || command=(mpirun --oversubscribe --bind-to none -np "$np" "${command[@]}")
        start=$(date +%s.%N)
        "${command[@]}" || [ $? -le 1 ]
        times+=("$($py -c "print($(date +%s.%N) - $start)")")
    done
    t=$(printf '%s\n' "${times[@]}" | median)
    [ -n "$base" ] || base=$t
    printf '| %s | %.2f | %.2f |\n' "$np" "$t" "$($py -c "print($base / $t)")"
done

# Building the index: every process indexes a share of the rank files into the shared cache.
# The same check from an empty cache and with only the index cached; the difference is the
# time spent indexing the three trace sets.
echo
echo "| processes | check, empty cache | check, index cached | indexing (difference) |"
echo "|---|---|---|---|"
for np in 1 2 4; do
    empty=(); cached=()
    for _ in $(seq "$runs"); do
        for mode in empty cached; do
            if [ "$mode" = empty ]; then rm -rf "$cache"; else rm -rf "$cache"/results.sqlite* "$cache"/unfinished; fi
            command=("$check" "$data/traces/dist" "$data/traces/ref" --perturbed "$data/traces/pert"
                     --cache-dir "$cache" --threads 1 --quiet)
            [ "$np" -eq 1 ] || command=(mpirun --oversubscribe --bind-to none -np "$np" "${command[@]}")
            start=$(date +%s.%N)
            "${command[@]}" || [ $? -le 1 ]
            elapsed=$($py -c "print($(date +%s.%N) - $start)")
            if [ "$mode" = empty ]; then empty+=("$elapsed"); else cached+=("$elapsed"); fi
        done
    done
    e=$(printf '%s\n' "${empty[@]}" | median)
    c=$(printf '%s\n' "${cached[@]}" | median)
    printf '| %s | %.2f | %.2f | %.2f |\n' "$np" "$e" "$c" "$($py -c "print($e - $c)")"
done
echo
echo "($ranks ranks, ${size} MB distributed trace, $(nproc) cores)"
