#!/usr/bin/env bash
# Screenshots of the real ttrace window on each bundled sample, under Xvfb: the GUI checks the
# sample, goes to the first fault, saves OUTDIR/<sample>.png, then the drill-down steps
# OUTDIR/<sample>-elements.png (element errors of the tensor) and OUTDIR/<sample>-ranks.png
# (its layer across the ranks), and quits. OUTDIR/row_bias_every_rank-hidpi.png is the first
# view at QT_SCALE_FACTOR=2 (high-DPI). OUTDIR/damaged-<name>.png show damaged copies of the
# samples (scripts/damage-samples.py): a rank file cut short, and a blind tensor.
# Usage: scripts/screenshots.sh OUTDIR   (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/screenshots.sh OUTDIR}
mkdir -p "$out"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
status=0
for sample in resources/samples/*/; do
    name=$(basename "$sample")
    echo "== $name"
    # A fresh settings folder: no window geometry from an earlier session.
    if ! XDG_CONFIG_HOME="$cache/config" TTRACE_CACHE_DIR="$cache" timeout 300 \
        xvfb-run -a -s "-screen 0 1920x1080x24" \
        build/app/ttrace "$sample" --screenshot "$out/$name.png" --screenshot-drilldown; then
        echo "   failed" >&2
        status=1
        continue
    fi
    echo "   $out/$name.png $out/$name-elements.png $out/$name-ranks.png"
done
python=.venv/bin/python
[ -x "$python" ] || python=python3
"$python" scripts/damage-samples.py "$cache/damaged"
for sample in "$cache"/damaged/*/; do
    name=damaged-$(basename "$sample")
    echo "== $name"
    if ! XDG_CONFIG_HOME="$cache/config" TTRACE_CACHE_DIR="$cache" timeout 300 \
        xvfb-run -a -s "-screen 0 1920x1080x24" \
        build/app/ttrace "$sample" --screenshot "$out/$name.png"; then
        echo "   failed" >&2
        status=1
        continue
    fi
    echo "   $out/$name.png"
done
first=row_bias_every_rank
echo "== $first at scale factor 2"
if ! QT_SCALE_FACTOR=2 XDG_CONFIG_HOME="$cache/config" TTRACE_CACHE_DIR="$cache" timeout 300 \
    xvfb-run -a -s "-screen 0 3840x2160x24" \
    build/app/ttrace "resources/samples/$first" --screenshot "$out/$first-hidpi.png"; then
    echo "   failed" >&2
    status=1
fi
exit $status
