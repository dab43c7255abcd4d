"""What torchtitan 0.3.0 needs to import and train on CPU processes (gloo) with torch 2.13's CPU
build; each item names what fails without it (docs/capture.md, "torchtitan on CPU processes").
`adapt()` must run before anything imports torchtitan's models."""

import sys
import types

import torch

# torchtitan.distributed.minimal_async_ep.api imports these Triton kernels unconditionally
# ("No module named 'triton'"); they serve only its GPU all-to-all token dispatcher, which
# this trainer never selects.
_TRITON_KERNELS = (
    "copy_full_counts_to_peers_kernel", "copy_rows_to_peers_kernel", "expand_topk_grad_kernel",
    "fill_combine_metadata_kernel", "fill_dispatch_metadata_kernel",
    "invert_flat_indices_kernel", "reduce_topk_slots_kernel", "topk_scores_grad_kernel")


def _unavailable(*args, **kwargs):
    raise RuntimeError("torchtitan's Triton kernels do not run on the CPU")


def adapt():
    kernels = types.ModuleType("torchtitan.distributed.minimal_async_ep.kernels")
    for name in _TRITON_KERNELS:
        setattr(kernels, name, _unavailable)
    sys.modules.setdefault(kernels.__name__, kernels)
    # Decoder.Config.update_from_config imports torchtitan.trainer only to ask whether its
    # config is a Trainer.Config; that module imports torchdata and tensorboard, which neither
    # the model nor its parallelization needs. A config that is not one skips the trainer's
    # own checks (sequence length against RoPE), which train.py makes itself.
    trainer = types.ModuleType("torchtitan.trainer")
    trainer.Trainer = type("Trainer", (), {"Config": type("Config", (), {})})
    sys.modules.setdefault(trainer.__name__, trainer)
    # torchtitan picks its device type at import, falling back to "cuda" where no accelerator
    # is found; meshes and buffers must be on the CPU.
    import torchtitan.tools.utils as utils

    utils.device_type, utils.device_module = "cpu", torch.cpu
