#!/usr/bin/env python3
"""Detection test of the torch-native trainer's bug corpus (examples/detection.py runs it):
every bug in every configuration and recipe it shows in, and every configuration without a
bug, in fp32 and bf16, checked by ttrace-check against a single-device reference, or with
--references laid-out against references on several ranks.

    detect.py --check build/app/ttrace-check --table docs/detection.md
    detect.py --check build/app/ttrace-check --table docs/detection.md --references laid-out
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import detection  # noqa: E402
from bugs import BUGS, CONFIGS, PARAMETER_GRADIENTS  # noqa: E402
from train import main as train_main  # noqa: E402

TRAINER = detection.Trainer(
    name="torch_native", train_main=train_main, bugs=BUGS, configs=CONFIGS,
    parameter_gradients=PARAMETER_GRADIENTS, dtypes=("fp32", "bf16"),
    # --references laid-out: each layout against another, fsdp2 against itself (a trusted
    # commit)
    reference_layouts={"tp2": "fsdp2", "tp2_sp": "fsdp2", "fsdp2": "fsdp2",
                       "fsdp2_tp2_sp": "tp2", "pp2": "tp2"},
    about="## The torch-native trainer (`examples/torch_native`)\n\nEach row is one run of "
          "the Llama-style trainer (`examples/torch_native/train.py`, 2 iterations of 2 "
          "micro-batches) parallelized with PyTorch's own APIs only (DTensor, "
          "parallelize_module, FSDP2, a 1F1B pipeline) and captured in a few lines, the "
          "placements read from the DTensors (the blocks' residual stream under sequence "
          "parallelism from a callback); the configurations are "
          "`examples/torch_native/bugs.py`'s `CONFIGS`.")

if __name__ == "__main__":
    sys.exit(detection.main(TRAINER))
