"""Mixtures of experts as the capture sees them: their routers, the modules hooked by default,
and the modules that compute on routed rows.

A router is a module with an integer `top_k` or `topk` attribute (torchtitan's
TokenChoiceTopKRouter, Megatron's TopKRouter, Hugging Face's MoE gates and blocks); the mixture
is its parent, whose forward routes the tokens, runs the experts and combines their outputs.

After the dispatch, experts compute on routed rows: the tokens sent to them, sorted by expert
(grouped experts, torchtitan's GroupedExperts and Megatron's GroupedMLP, given the tokens per
expert) or the subset that chose one expert (a loop over experts). How many rows there are and
in which order depends on every token's routing, and under data or expert parallelism on
which rank sorted them, so no layout maps them to the reference's rows. The capture leaves
such a module out, says so once, and names it in the manifest; the experts' parameters and
gradients, the router and the per-token outputs around the experts are compared as usual."""

import warnings

import torch

from .wrappers import unwrapped


def is_router(module):
    k = getattr(module, "top_k", getattr(module, "topk", None))
    return isinstance(k, int) and not isinstance(k, bool)


def _parent(name):
    return name.rsplit(".", 1)[0] if "." in name else ""


def mixtures(model):
    """{router name: its mixture's name} for the routers of `model` ("" for the model itself),
    by their names in `model`. A wrapped router (torch.compile, checkpoint_wrapper: both pass
    `top_k` through) is named by its outermost wrapper."""
    found, seen = {}, set()
    for n, m in model.named_modules():
        if n and is_router(m) and id(unwrapped(m)) not in seen:
            seen.add(id(unwrapped(m)))
            found[n] = _parent(n)
    return found


def mixture_modules(model, blocks):
    """The modules of `model`'s mixtures of experts that a capture hooks by default besides
    `blocks` (the named blocks): each router and, where the mixture is not itself a named block,
    the mixture and its children (torchtitan's `moe`, its `router`, `routed_experts` and
    `shared_experts`), whose inputs and outputs are per token."""
    chosen = []
    for router, mixture in mixtures(model).items():
        chosen.append(router)
        if mixture and mixture not in blocks:
            chosen.append(mixture)
            chosen += [f"{mixture}.{c}" for c, _ in model.get_submodule(mixture).named_children()]
    return chosen


def _rows(t):
    """The number of rows (tokens) of tensor `t`: all but its last dimension, global for a
    DTensor."""
    return t.numel() // t.shape[-1] if t.dim() and t.shape[-1] else t.numel()


class RoutedRows:
    """Which hooked modules compute on routed rows. While a mixture's forward runs, its
    router's first input gives the tokens; a module of the mixture called after the router
    computes on routed rows when its first floating-point input has another number of rows, or
    when it is given tokens-per-expert counts (a 1-D integer tensor) without the router's
    choices (an integer tensor with a row per token). A module found once stays left out, with
    the modules inside it, so that every iteration, micro-batch and recomputation records the
    same tensors."""

    def __init__(self, model, found, name_map):
        """found: mixtures(model)."""
        self._model = model
        # global names, as the hooks see them (wrappers left out)
        self._routers = {name_map(r): (r, m) for r, m in found.items()}
        self._name_map = name_map
        self._tokens = {}  # global mixture name -> tokens of its router's input, while it runs
        self.left_out = []  # global names, in the order found

    def hooks(self):
        """Hooks on the routers and their mixtures, on the modules inside their wrappers (a
        recomputation runs those); a list of handles."""
        handles = []
        for router, mixture in self._routers.values():
            key = self._name_map(mixture) if mixture else ""
            handles.append(unwrapped(self._model.get_submodule(router))
                           .register_forward_pre_hook(self._router_hook(key)))
            module = unwrapped(self._model.get_submodule(mixture)) if mixture else self._model
            handles.append(module.register_forward_pre_hook(self._clear_hook(key)))
            handles.append(module.register_forward_hook(self._clear_hook(key),
                                                        always_call=True))
        return handles

    def computes_on_routed_rows(self, name, args):
        """Whether the module of global name `name`, called with `args`, computes on routed
        rows; warns once when first found."""
        if self.is_left_out(name):
            return True
        if name in self._routers:
            return False
        tokens = next((t for m, t in self._tokens.items()
                       if t is not None and (not m or name.startswith(m + "."))), None)
        tensors = [t for t in args if isinstance(t, torch.Tensor)]
        x = next((t for t in tensors if t.is_floating_point()), None)
        if tokens is None or x is None:
            return False
        integers = [t for t in tensors if not t.is_floating_point() and t.dtype != torch.bool]
        counts = any(t.dim() == 1 for t in integers)
        choices = any(t.dim() >= 2 and _rows(t) == tokens for t in integers)
        rows = _rows(x)
        if rows == tokens and (choices or not counts):
            return False
        self.left_out.append(name)
        warnings.warn(
            f"ttrace: {name} computes on routed rows ({rows} rows where its mixture of experts "
            f"has {tokens} tokens{', with tokens-per-expert counts' if counts else ''}): their "
            "number and order depend on the routing of every token, so no layout maps them to "
            "the reference's. Its inputs and outputs are left out (the manifest's "
            "capture.routed_rows_left_out); its parameters and gradients, the router and the "
            "mixture's per-token outputs are compared.", stacklevel=2)
        return True

    def is_left_out(self, name):
        """Whether global name `name` was found to compute on routed rows, or lies inside such
        a module."""
        return any(name == n or name.startswith(n + ".") for n in self.left_out)

    def _router_hook(self, mixture):
        def hook(module, args):
            x = next((t for t in args if isinstance(t, torch.Tensor)), None)
            if x is not None:
                self._tokens[mixture] = _rows(x)

        return hook

    def _clear_hook(self, mixture):
        def hook(module, *_):
            self._tokens[mixture] = None

        return hook
