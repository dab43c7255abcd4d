"""Routing replay: the experts a mixture of experts' routers chose, recorded by every run and,
given a reference trace, replaced by the reference's.

Top-k routing turns a round-off difference into another expert for a token whose top scores
are close: that token's output then differs by its whole size, in the distributed run and in
the perturbed reference alike, and wherever the two flip different tokens the thresholds say
nothing. A run that replays the reference's choices computes every expert's output on the
tokens the reference gave it, so what follows a router differs from the reference by
round-off only (docs/capture.md, "Routing replay").

A router (ttrace.experts.is_router) is a module with an integer `top_k` or `topk`; each
`torch.topk` its forward calls is one choice, numbered from 0 within the forward. The scores
a replayed top-k returns are the run's own scores of the reference's experts."""

from dataclasses import dataclass

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from .dtensor import is_dtensor
from .recompute import in_recomputation
from .rewrite import ReferenceDatasets
from .staging import Staged, stage


@dataclass
class RoutingChoice:
    """One top-k choice queued for the writer: this rank's shard of the experts chosen, its
    copy to the host started (ttrace.staging)."""

    name: str
    experts: Staged
    iteration: int
    micro_batch: int
    call: int
    layout: object


class ReferenceRouting(ReferenceDatasets):
    """The `/routing` choices of a reference trace folder, by (router name, iteration,
    micro-batch, call)."""

    def __init__(self, folder):
        super().__init__(folder, "routing", lambda a: (
            str(a["name"]), int(a["iteration"]), int(a["micro_batch"]), int(a["call"])))

    def choice(self, name, iteration, micro_batch, call, layout, like):
        """The reference's experts of choice `call` of router `name`, sliced to `layout` (the
        shard's global shape and ranges), on `like`'s device; None when it has none."""
        found = self.sliced((name, iteration, micro_batch, call), layout, like.shape,
                            f"{name} top-k {call}")
        if found is None:
            return None
        return torch.from_numpy(np.ascontiguousarray(found[1])).to(like.device)


class Routing:
    """The routers' hooks of one capture. where() -> (iteration, micro-batch); layout_of(name,
    experts, module) -> the Layout of a choice; sample_dim(name, input) -> the dimension of a
    router's first input holding the samples, for a run with a `sample_order` (this run's
    sample i is the reference's order[i]); record(RoutingChoice) queues a write."""

    def __init__(self, where, layout_of, record, replay_from=None, sample_order=None,
                 sample_dim=None):
        self._where = where
        self._layout_of = layout_of
        self._record = record
        self._reference = ReferenceRouting(replay_from) if replay_from else None
        self._order = sample_order
        self._to_reference_order = None if sample_order is None else sample_order.argsort()
        self._sample_dim = sample_dim
        self._frames = []  # the routers whose forward runs now, innermost last
        # the manifest's: calls, and tokens whose own choice differs, in all and per router
        self.counts = {"replayed": 0, "not_found": 0, "tokens": 0, "differing": 0,
                       "routers": {}}

    @property
    def replaying(self):
        return self._reference is not None

    def hooks(self, routers):
        """Hooks on `routers` ((global name, module) pairs)."""
        handles = []
        for name, module in routers:
            handles.append(module.register_forward_pre_hook(self._enter(name)))
            handles.append(module.register_forward_hook(self._exit, always_call=True))
        return handles

    @property
    def reference_folder(self):
        return self._reference.folder

    def close(self):
        if self._reference is not None:
            self._reference.close()

    def _enter(self, name):
        def hook(module, args):
            mode = _TopK(self._on_topk)
            self._frames.append(_Frame(name, module, args[0] if args else None, mode))
            mode.__enter__()

        return hook

    def _exit(self, module, args, output):
        if self._frames and self._frames[-1].module is module:
            self._frames.pop().mode.__exit__(None, None, None)

    def _on_topk(self, args, kwargs, result):
        frame = self._frames[-1]
        call = frame.calls
        frame.calls += 1
        experts = result.indices
        local = experts.to_local() if is_dtensor(experts) else experts
        iteration, micro_batch = self._where()
        layout = self._layout_of(frame.name, experts, frame.module)
        dim = self._samples_of(frame, local)
        recomputed = in_recomputation()
        if not recomputed:  # a recomputation chooses what the forward chose
            mine = local if dim is None else local.index_select(
                dim, self._to_reference_order.to(local.device))
            self._record(RoutingChoice(frame.name, stage(mine), iteration, micro_batch, call,
                                       layout))
        if self._reference is None:
            return result
        theirs = self._reference.choice(frame.name, iteration, micro_batch, call, layout, local)
        if not recomputed:
            self.counts["not_found" if theirs is None else "replayed"] += 1
        if theirs is None:
            return result
        if dim is not None:  # the reference's samples in this run's order
            theirs = theirs.index_select(dim, self._order.to(theirs.device))
        top_dim = kwargs.get("dim", args[2] if len(args) > 2 else -1)
        if not recomputed:
            rows = local.sort(top_dim).values != theirs.sort(top_dim).values
            tokens = rows.numel() // max(rows.shape[top_dim], 1)
            differing = int(rows.any(top_dim).sum())
            router = self.counts["routers"].setdefault(frame.name,
                                                       {"tokens": 0, "differing": 0})
            for totals in (self.counts, router):
                totals["tokens"] += tokens
                totals["differing"] += differing
        if is_dtensor(experts):
            theirs = type(experts).from_local(theirs, experts.device_mesh, experts.placements,
                                              run_check=False, shape=experts.shape,
                                              stride=experts.stride())
        scores = args[0] if args else kwargs["input"]
        return torch.return_types.topk((scores.gather(top_dim, theirs), theirs))

    def _samples_of(self, frame, local):
        """The dimension of choice `local` that holds the samples, when this run reorders
        them: the router's first input's, which the choice must share."""
        if self._order is None:
            return None
        x = frame.input
        dim = None if x is None else self._sample_dim(frame.name, x)
        if dim is None:
            return None
        if dim >= local.dim() or local.shape[dim] != x.shape[dim]:
            raise ValueError(
                f"{frame.name}: its top-k choice of shape {list(local.shape)} does not keep "
                f"the samples of its input (shape {list(x.shape)}, samples along dimension "
                f"{dim}), so the perturbed reference cannot put them in the reference's "
                "order; replay it in a run without sample_order")
        return dim


@dataclass
class _Frame:
    name: str
    module: torch.nn.Module
    input: object
    mode: TorchFunctionMode
    calls: int = 0


class _TopK(TorchFunctionMode):
    """Hands each torch.topk (function or method) run under it to `on_topk`."""

    def __init__(self, on_topk):
        super().__init__()
        self._on_topk = on_topk

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func is torch.topk or func is torch.Tensor.topk:
            return self._on_topk(args, kwargs, result)
        return result
