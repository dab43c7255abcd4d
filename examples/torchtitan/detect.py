#!/usr/bin/env python3
"""Detection test of the torchtitan trainer's bug corpora (examples/detection.py runs it): every
bug in every configuration and recipe it shows in, and every configuration without a bug,
checked by ttrace-check; `--model llama3` (fp32, bf16, FSDP2 mixed precision, bf16_mp,
torchao's fp8 and, in full only, not in CI's subset, its MXFP8) or `--model qwen3_moe` (fp32, bf16 and bf16_mp; bf16_mp in full only, not in
CI's subset), each its own section of docs/detection.md.

    detect.py --check build/app/ttrace-check --table docs/detection.md [--model qwen3_moe]
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import detection  # noqa: E402
from bugs import BUGS, CONFIGS, MOE_BUGS, MOE_CONFIGS, PARAMETER_GRADIENTS  # noqa: E402
from train import main as train_main  # noqa: E402

RUN = ("Each row is one run of `examples/torchtitan/train.py` (2 iterations of 2 micro-batches, "
       "started from one DCP seed checkpoint) captured with the three lines of docs/capture.md, "
       "no layout given; the configurations are `examples/torchtitan/bugs.py`'s {configs}, the "
       "bugs changes to torchtitan's code or to the training loop (`patches.py`, `train.py`).")

TRAINERS = {
    "llama3": detection.Trainer(
        name="torchtitan", train_main=train_main, bugs=BUGS, configs=CONFIGS,
        parameter_gradients=PARAMETER_GRADIENTS,
        dtypes=("fp32", "bf16", "bf16_mp", "fp8", "mxfp8"),
        about="## torchtitan's Llama-3 (`examples/torchtitan`)\n\ntorchtitan 0.3.0's own "
              "Llama-3 (`debugmodel` with 2 of its 6 blocks, plus a hidden dropout after each "
              "block's attention: docs/capture.md) parallelized by its own "
              "`parallelize_llama`; `bf16_mp`: fp32 weights computed in bf16 by FSDP2's "
              "MixedPrecisionPolicy, the references too, on one process; `fp8`: torchtitan's "
              "float8 converter (torchao's `Float8Linear`, tensorwise scales, GEMMs emulated), "
              "`mxfp8`: its MXFP8 converter (torchao's `MXFP8Linear`, E8M0 scales per 32, "
              "GEMMs emulated; under FSDP2 only: torchtitan's MXFP8 linears fail under tensor "
              "parallelism on the CPU, without ttrace too), whose forward and backward GEMM "
              "operands the capture records with no code of the trainer's. "
              + RUN.format(configs="`CONFIGS`"),
        ci_dtypes=("fp32", "bf16", "bf16_mp", "fp8"),
        recipe_configs={"mxfp8": ("fsdp2", "fsdp2_ac", "fsdp2_compile")}),
    "qwen3_moe": detection.Trainer(
        name="torchtitan_moe", train_main=lambda argv: train_main(argv + ["--model", "qwen3_moe"]),
        bugs=MOE_BUGS, configs=MOE_CONFIGS, parameter_gradients=PARAMETER_GRADIENTS,
        dtypes=("fp32", "bf16", "bf16_mp"),
        about="## torchtitan's Qwen3-MoE (`examples/torchtitan --model qwen3_moe`)\n\n"
              "torchtitan 0.3.0's own Qwen3 mixture of experts (`debugmodel_moe` with 2 of its "
              "8 blocks and 4 of its 64 experts, 2 per token) parallelized by its own "
              "`parallelize_qwen3`, with expert parallelism and its auxiliary-loss-free load "
              "balancing; the perturbed reference and the distributed runs replay the "
              "reference's routing (docs/capture.md, \"Routing replay\"). "
              + RUN.format(configs="`MOE_CONFIGS`"),
        replay_routing=True, ci_dtypes=("fp32", "bf16")),
}

if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--model", choices=sorted(TRAINERS), default="llama3")
    known, sys.argv[1:] = ap.parse_known_args()
    sys.exit(detection.main(TRAINERS[known.model]))
