#!/usr/bin/env bash
# The GUI at scale: for TP 8 x PP 8 x DP jobs of growing DP (make_synthetic_traces.py, a bug
# in layer 5), checks each set once with ttrace-check (filling the results store), then opens
# it in the real window on the offscreen platform (bench_gui): time to open from the store,
# first heatmap paint, the ranks x layer view of the faulty layer, the faulty tensor's detail,
# and peak resident memory. Usage: bench/run_gui_scale_bench.sh [DP...] (default 4 8 16 32;
# TENSORS=16 logical tensors per rank). Needs a built ./build. Prints a Markdown table;
# docs/performance.md quotes it.
set -euo pipefail
cd "$(dirname "$0")/.."
dps=("${@:-4 8 16 32}")
read -r -a dps <<<"${dps[*]}"
tensors=${TENSORS:-16}
root=${TTRACE_BENCH_DIR:-/tmp/ttrace-bench}
py=.venv/bin/python

echo "| ranks | datasets | pieces held | check s | check peak MiB | open s | first paint s | ranks x layer s | rows | tensor detail s | element view s | GUI peak MiB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for dp in "${dps[@]}"; do
    data=$root/gui-dp$dp-t$tensors
    if [ ! -f "$data/traces/dist/manifest.json" ]; then
        start=$(date +%s)
        $py bench/make_synthetic_traces.py "$data/traces" --dp "$dp" --tensors-per-rank "$tensors" \
            --bug 5 >&2
        echo "generated $data/traces in $(($(date +%s) - start)) s" >&2
    fi
    rm -rf "$data/cache"
    export TTRACE_CACHE_DIR=$data/cache
    set +e
    /usr/bin/time -f "%e %M" -o "$data/check.time" build/app/ttrace-check "$data/traces/dist" \
        "$data/traces/ref" --perturbed "$data/traces/pert" --quiet >/dev/null 2>"$data/check.err"
    status=$?
    set -e
    if [ "$status" -ne 1 ]; then  # 1: bug found, as generated
        echo "ttrace-check exited with $status on $data:" >&2
        cat "$data/check.err" >&2
        exit 1
    fi
    read -r check_s check_kb < <(tail -1 "$data/check.time")  # after "exited with" on a bug
    line=$(build/bench/bench_gui "$data/traces/dist" "$data/traces/ref" "$data/traces/pert")
    ranks=$(ls "$data/traces/dist"/rank*.h5 | wc -l)
    $py -c "
import json
r = json.loads('$line')
print(f\"| {r['ranks']} | {$ranks * $tensors} | {r['pieces']} | $check_s | {$check_kb / 1024:.0f} | {r['open_s']:.2f} \"
      f\"| {r['first_paint_s']:.3f} | {r['ranks_of_layer_s']:.3f} | {r['ranks_of_layer_rows']} \"
      f\"| {r['tensor_detail_s']:.3f} | {r['element_view_s']:.2f} | {r['peak_rss_mib']:.0f} |\")"
done
