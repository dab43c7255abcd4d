#!/usr/bin/env python3
"""Detection test of the GPT trainer's bug corpus (examples/detection.py runs it): every bug in
every configuration and recipe it shows in, and every configuration without a bug, in fp32,
bf16, fp8 (per-tensor scales), fp8_rowwise (per-row scales), mxfp8 (MXFP8: power-of-two
scales per 32 elements) and nvfp4 (NVFP4: fp4 elements, e4m3 scales per 16 and an fp32 scale
per tensor), checked by ttrace-check.

    detect.py --check build/app/ttrace-check --table docs/detection.md
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import detection  # noqa: E402
from bugs import BUGS, CONFIGS, PARAMETER_GRADIENTS  # noqa: E402
from train import main as train_main  # noqa: E402

TRAINER = detection.Trainer(
    name="gpt", train_main=train_main, bugs=BUGS, configs=CONFIGS,
    parameter_gradients=PARAMETER_GRADIENTS, dtypes=("fp32", "bf16", "fp8", "fp8_rowwise", "mxfp8",
                                                     "nvfp4"),
    # --references laid-out: each layout against another, cp2 against itself (a trusted commit)
    reference_layouts={"tp2": "dp2", "tp2_sp": "dp2", "dp2": "tp2", "pp2": "tp2",
                       "pp2_ac": "tp2_dp2", "tp2_dp2": "pp2", "pp2_tp2_sp": "tp2_dp2",
                       "cp2": "cp2", "cp2_tp2": "dp2"},
    about="## The GPT trainer (`examples/gpt`)\n\nEach row is one run of the tiny GPT trainer "
          "(`examples/gpt/train.py`, 2 iterations of 2 micro-batches) with Megatron-style "
          "parallelism written by hand; the configurations are `examples/gpt/bugs.py`'s "
          "`CONFIGS`.")

if __name__ == "__main__":
    sys.exit(detection.main(TRAINER))
