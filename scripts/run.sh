#!/usr/bin/env bash
# The main job of the README: installs dependencies, builds, and checks the bundled sample
# traces (a clean run and four buggy runs of the GPT trainer examples/gpt; the README's
# "Bundled samples" lists them) with the headless checker, which writes its reports to
# ./out/<sample>/report.{html,md,json}; then, when there is a display, opens the GUI on the
# row_bias_every_rank sample.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
scripts/build.sh
mkdir -p out
status=0
for sample in resources/samples/*/; do
    name=$(basename "$sample")
    mkdir -p "out/$name"
    echo "== $name"
    set +e
    build/app/ttrace-check "$sample/dist" "$sample/ref" --perturbed "$sample/pert" \
        --cache-dir out/cache --html "out/$name/report.html" --md "out/$name/report.md" \
        --json "out/$name/report.json"
    code=$?
    set -e
    echo "   exit code $code (0 no bug, 1 bug found, 2 bad input)"
    [ "$code" -le 1 ] || status=$code
done
if [ "$status" -ne 0 ]; then
    exit $status
fi
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    echo "== opening the GUI on resources/samples/row_bias_every_rank"
    exec build/app/ttrace resources/samples/row_bias_every_rank
fi
echo "no display: the reports are in out/<sample>/ (open out/row_bias_every_rank/report.html)"
