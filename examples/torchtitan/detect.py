#!/usr/bin/env python3
"""Detection test of the torchtitan trainer's bug corpus (examples/detection.py runs it): every
bug in every configuration and recipe it shows in, and every configuration without a bug, in
fp32, bf16 and FSDP2 mixed precision (bf16_mp), checked by ttrace-check.

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
    name="torchtitan", train_main=train_main, bugs=BUGS, configs=CONFIGS,
    parameter_gradients=PARAMETER_GRADIENTS, dtypes=("fp32", "bf16", "bf16_mp"),
    about="## torchtitan's Llama-3 (`examples/torchtitan`)\n\nEach row is one run of "
          "torchtitan 0.3.0's own Llama-3 model (`debugmodel` with 2 of its 6 blocks) "
          "parallelized by torchtitan's own `parallelize_llama` (`examples/torchtitan/train.py`, "
          "2 iterations of 2 micro-batches, started from one DCP seed checkpoint; `bf16_mp`: fp32 "
          "weights computed in bf16 by FSDP2's MixedPrecisionPolicy, the references too, "
          "on one process) and captured "
          "with the three lines of docs/capture.md, no layout given; the configurations are "
          "`examples/torchtitan/bugs.py`'s `CONFIGS`, the bugs changes to torchtitan's code or "
          "to the training loop (`patches.py`, `train.py`).")

if __name__ == "__main__":
    sys.exit(detection.main(TRAINER))
