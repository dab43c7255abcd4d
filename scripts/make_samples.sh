#!/bin/sh
# Regenerates the bundled sample traces resources/samples/<sample>/{dist,ref,pert} and
# resources/samples/samples.json with the GPT trainer (examples/gpt/samples.py says what each
# is and what the checker must find). All bf16, one iteration of two micro-batches, seeded:
#   clean                      pp2_tp2_sp  no bug (pipeline x tensor x sequence parallel, 4 ranks)
#   row_bias_every_rank        tp2         tensor parallel: row-parallel bias added on every rank
#   sp_norm_grad_no_allreduce  pp2_tp2_sp  sequence parallel: layer-norm weight grads not all-reduced
#   moe_expert_offset          dp2         expert parallel: tokens run through the wrong expert
#   pp_stale_activation        pp2         pipeline: a stage sends a stale activation
# The references are the same for every sample: clean holds them, the others link to them.
# Usage: scripts/make_samples.sh [OUT]   (OUT defaults to resources/samples)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/resources/samples}
mkdir -p "$out"
"$root/.venv/bin/python" "$root/examples/gpt/samples.py" "$out"
du -sh "$out"
