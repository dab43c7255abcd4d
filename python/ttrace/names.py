"""Global names of modules and parameters, their layer and expert numbers, and which modules a
capture hooks by default.

Wrappers that training code puts around a module leave its tensors as they are but add a path
component: torch.compile's `_orig_mod`, `checkpoint_wrapper`'s `_checkpoint_wrapped_module`.
The trace names a tensor without them, so a compiled or checkpointed run pairs with an eager
reference."""

import re

import torch

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")
_EXPERT = re.compile(r"(?:^|\.)experts\.(\d+)(?:\.|$)")
_WRAPPERS = ("_orig_mod", "_checkpoint_wrapped_module")


def clean_name(name):
    """`name` without the path components that wrappers add (torch.compile, checkpointing)."""
    return ".".join(part for part in name.split(".") if part not in _WRAPPERS)


def default_layer_of(name):
    """Global layer number from a `layers.N` path component, -1 outside the layers."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else -1


def default_expert_of(name):
    m = _EXPERT.search(name)
    return int(m.group(1)) if m else -1


def layer_offset(offset, prefix="layers"):
    """A name_map that renumbers local `prefix.N` to `prefix.(N+offset)`, as a pipeline stage
    whose first local layer is global layer `offset` needs."""
    pattern = re.compile(rf"(^|\.){re.escape(prefix)}\.(\d+)(?=\.|$)")

    def name_map(name):
        return pattern.sub(lambda m: f"{m.group(1)}{prefix}.{int(m.group(2)) + offset}", name, 1)

    return name_map


def count_layers(names, layer_of=default_layer_of):
    """The number of layers that global names `names` span (1 when none is in a layer): the
    manifest's `num_layers` when the capture is not told it."""
    layers = [layer_of(n) for n in names]
    return max(max(layers) + 1, 1) if layers else 1


def default_modules(model):
    """Leaf modules plus the named blocks (children of a ModuleList / ModuleDict), by their
    names in `model`. A wrapper (torch.compile's, checkpoint_wrapper) counts as the module it
    wraps: the module inside is chosen, whose hooks also see a recomputed forward."""
    names = {id(m): n for n, m in model.named_modules()}
    chosen = []
    containers = (torch.nn.ModuleList, torch.nn.ModuleDict)
    for name, module in model.named_modules():
        if not name or name.rsplit(".", 1)[-1] in _WRAPPERS:
            continue
        inner = unwrapped(module)
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        leaf = not any(True for _ in inner.children())
        if leaf or isinstance(unwrapped(parent), containers):
            chosen.append(names[id(inner)])
    return chosen


def unwrapped(module):
    """The module inside torch.compile's and checkpoint_wrapper's wrappers, in any order."""
    while True:
        inner = next((getattr(module, a) for a in _WRAPPERS
                      if isinstance(getattr(module, a, None), torch.nn.Module)), None)
        if inner is None:
            return module
        module = inner
