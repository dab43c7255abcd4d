#!/usr/bin/env bash
# Screenshots of the real ttrace window on each bundled sample, under Xvfb: the GUI checks the
# sample, goes to the first fault, saves OUTDIR/<sample>.png and quits.
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
        build/app/ttrace "$sample" --screenshot "$out/$name.png"; then
        echo "   failed" >&2
        status=1
        continue
    fi
    echo "   $out/$name.png"
done
exit $status
