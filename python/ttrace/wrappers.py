"""Wrappers that training code puts around a module leave its tensors as they are but add a path
component: torch.compile's `_orig_mod`, `checkpoint_wrapper`'s `_checkpoint_wrapped_module`.
The trace names a tensor without them, so a compiled or checkpointed run pairs with an eager
reference."""

import torch

WRAPPERS = ("_orig_mod", "_checkpoint_wrapped_module")


def clean_name(name):
    """`name` without the path components that wrappers add (torch.compile, checkpointing)."""
    return ".".join(part for part in name.split(".") if part not in WRAPPERS)


def unwrapped(module):
    """The module inside torch.compile's and checkpoint_wrapper's wrappers, in any order."""
    while True:
        inner = next((getattr(module, a) for a in WRAPPERS
                      if isinstance(getattr(module, a, None), torch.nn.Module)), None)
        if inner is None:
            return module
        module = inner
