"""Global names of modules and parameters, their layer and expert numbers, and which modules a
capture hooks by default."""

import re

import torch

from .experts import mixture_modules
from .wrappers import WRAPPERS, unwrapped

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")
_EXPERT = re.compile(r"(?:^|\.)experts\.(\d+)(?:\.|$)")


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
    """Leaf modules plus the named blocks (children of a ModuleList / ModuleDict), plus the
    routers and mixtures of experts (ttrace.experts.mixture_modules), by their names in
    `model`. A wrapper (torch.compile's, checkpoint_wrapper) counts as the module it wraps: the
    module inside is chosen, whose hooks also see a recomputed forward."""
    names = {id(m): n for n, m in model.named_modules()}
    chosen, blocks = [], set()
    containers = (torch.nn.ModuleList, torch.nn.ModuleDict)
    for name, module in model.named_modules():
        if not name or name.rsplit(".", 1)[-1] in WRAPPERS:
            continue
        inner = unwrapped(module)
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        leaf = not any(True for _ in inner.children())
        block = isinstance(unwrapped(parent), containers)
        if leaf or block:
            chosen.append(names[id(inner)])
        if block:
            blocks.add(names[id(inner)])
    wrapped = {n: names[id(unwrapped(m))] for n, m in model.named_modules()}
    extra = [wrapped[n] for n in mixture_modules(model, blocks)]
    return chosen + [n for n in dict.fromkeys(extra) if n not in chosen]
