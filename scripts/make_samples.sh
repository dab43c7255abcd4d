#!/bin/sh
# Regenerates the bundled sample traces resources/samples/<case>/{dist,ref,pert} with the
# example trainer (tp=2, dp=2, fp32, one iteration of two micro-batches, to keep them small).
# Usage: scripts/make_samples.sh [OUT]   (OUT defaults to resources/samples)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/resources/samples}
run="$root/examples/tp_mlp/run_all.sh"
"$run" "$out/clean" --iterations 1
"$run" "$out/row_bias_every_rank" --iterations 1 --bug row_bias_every_rank
"$run" "$out/tp_input_grad_no_allreduce" --iterations 1 --bug tp_input_grad_no_allreduce
du -sh "$out"
