#!/usr/bin/env bash
# The whole detection corpora, every bug in every configuration and recipe it shows in and
# every configuration clean in every recipe (CI runs each corpus's `--subset ci` instead),
# writing their sections of docs/detection.md; the GPT and torch-native corpora both against
# single-device references and against references on several ranks (`--references both`: each
# run trained once, checked both ways). About 30 minutes on 2 cores.
#   examples/run-corpora.sh [build/app/ttrace-check]
set -euo pipefail
cd "$(dirname "$0")/.."
check="${1:-build/app/ttrace-check}"
python=".venv/bin/python"
jobs="$(nproc)"
"$python" examples/gpt/detect.py --check "$check" --jobs "$jobs" --table docs/detection.md \
    --references both
"$python" examples/torch_native/detect.py --check "$check" --jobs "$jobs" --table docs/detection.md \
    --references both
"$python" examples/torchtitan/detect.py --check "$check" --jobs "$jobs" --table docs/detection.md
"$python" examples/torchtitan/detect.py --model qwen3_moe --check "$check" --jobs "$jobs" \
    --table docs/detection.md
