#!/bin/sh
# Runs the example three times into OUT: the distributed run (OUT/dist), the single-device
# reference (OUT/ref) and the perturbed reference (OUT/pert).
# Usage: run_all.sh OUT [--bug NAME] [--dtype fp32|bf16] [--tp N] [--dp N]
# (the references ignore --bug, --tp and --dp: they are the bug-free single-device model)
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 OUT [train.py options]" >&2
    exit 2
fi
out=$1
shift
here=$(dirname "$0")
py=${PYTHON:-$here/../../.venv/bin/python}
# the writer adds to a folder; stale rank files of an earlier, larger run must not survive
rm -rf "$out/dist" "$out/ref" "$out/pert"
"$py" "$here/train.py" --role distributed --out "$out/dist" "$@"
"$py" "$here/train.py" --role reference --out "$out/ref" "$@"
"$py" "$here/train.py" --role perturbed-reference --out "$out/pert" "$@"
