#!/usr/bin/env bash
# A reference on several ranks against a single-device reference holding the same values: the
# comparison's GB/s and peak memory with each, in rounds (one run of each per round, page cache
# warm), then the same two checks under 2 MPI processes where mpirun exists. The synthetic set
# is bench/make_bench_traces.py's: dist is tp4 x dp2, ref-tp8 cuts the columns over 8 ranks,
# so every block is assembled from 8 pieces.
# Usage: bench/run_cross_layout_bench.sh [SIZE_GB]   (default 1; needs a built ./build)
# Prints Markdown tables; docs/performance.md quotes them.
set -euo pipefail
cd "$(dirname "$0")/.."
gb=${1:-1}
dir=${TTRACE_BENCH_DIR:-/tmp/ttrace-bench}/${gb}gb
runs=${TTRACE_BENCH_RUNS:-3}
py=.venv/bin/python
bench=build/bench/bench_compare
check=build/app/ttrace-check
export TTRACE_BENCH_BACKEND=${TTRACE_BENCH_BACKEND:-cpu}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { $py -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }

[ -f "$dir/ref-tp8/manifest.json" ] || $py bench/make_bench_traces.py "$dir" --gb "$gb" >&2
cat "$dir"/dist/*.h5 "$dir"/ref/*.h5 "$dir"/ref-tp8/*.h5 >/dev/null  # all in the page cache

declare -A speeds=() peaks=()
for _ in $(seq "$runs"); do
    for ref in ref ref-tp8; do
        line=$($bench compare "$dir/dist" "$dir/$ref")
        speeds[$ref]+="$(echo "$line" | field gb_per_s) "
        peaks[$ref]+="$(echo "$line" | field peak_rss_mb) "
    done
done
echo "| reference ($gb GB set, warm) | GB/s (median of $runs) | peak RSS MB (median) |"
echo "|---|---|---|"
for ref in ref ref-tp8; do
    label=$([ "$ref" = ref ] && echo "one device" || echo "8 ranks, Shard(1)")
    printf '| %s | %.2f | %.0f |\n' "$label" "$(printf '%s\n' ${speeds[$ref]} | median)" \
        "$(printf '%s\n' ${peaks[$ref]} | median)"
done

command -v mpirun >/dev/null || exit 0
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
echo
echo "| reference | processes (1 thread each) | seconds (median of $runs) |"
echo "|---|---|---|"
for ref in ref ref-tp8; do
    # the index is built once, untimed; each timed check then compares afresh
    "$check" "$dir/dist" "$dir/$ref" --perturbed "$dir/pert" --cache-dir "$cache" --quiet ||
        [ $? -le 1 ]
    for np in 1 2; do
        times=()
        for _ in $(seq "$runs"); do
            rm -rf "$cache"/results.sqlite* "$cache"/unfinished  # compare afresh every time
            command=("$check" "$dir/dist" "$dir/$ref" --perturbed "$dir/pert" --cache-dir "$cache"
                     --threads 1 --quiet)
            [ "$np" -eq 1 ] || command=(mpirun --oversubscribe --bind-to none -np "$np" "${command[@]}")
            start=$(date +%s.%N)
            "${command[@]}" || [ $? -le 1 ]
            times+=("$($py -c "print($(date +%s.%N) - $start)")")
        done
        printf '| %s | %s | %.2f |\n' "$ref" "$np" "$(printf '%s\n' "${times[@]}" | median)"
    done
done
