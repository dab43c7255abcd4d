"""Where each captured tensor of a distributed run sits in the global tensor, derived from the
run itself so that a model parallelized by PyTorch's own plans needs no callback.

The evidence, first that answers wins:

1. a DTensor says so itself (ttrace.dtensor);
2. the capture's `placements` callback, where one was given and it answers;
3. what the capture saw happen to a plain tensor: it came out of a parallel style's output
   conversion (a DTensor redistributed and made local, `use_local_output`), and its layout is
   the one DTensor itself gives it there; or an element-wise operation (torch's `pointwise`
   operators, dropout, layer norm) made it from a tensor of its shape whose layout is known,
   as DTensor's own rule for them says (activations, the residual stream's additions); or it is
   the output of a module without a style that kept the shape of an input whose layout is
   known (a transformer block on the residual stream); a view that only renames a tensor (an
   autograd function returning its input, as FSDP2's hooks do) has its layout; a gradient has
   the layout of the tensor it is the gradient of;
4. the default: parameters by Megatron's attributes (tensor_model_parallel, partition_dim,
   partition_stride), else copies; activations split by batch over the data-parallel axes when
   their first dimension holds the forward's samples, whole elsewhere.

An activation without a batch dimension (a position embedding's [seq, dim]) is the same on
every data-parallel rank, and its gradient a partial sum over them: each rank's holds its own
samples' part, as DTensor's rule for a replicated tensor broadcast over a sharded batch says.

Where (4) is a guess, a plain activation inside a model-parallel region, the capture warns
once per module, naming the tensor and what to pass."""

import itertools
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakTensorKeyDictionary

from .dtensor import dtensor_layout, is_dtensor, mesh_axes_of
from .placement import Layout, even_layout

ACTIVATION_KINDS = ("forward_input", "forward_output", "output_grad", "input_grad")
_GRADIENT_KINDS = ("output_grad", "input_grad")
_aten = torch.ops.aten
# operators that keep their input's layout without the `pointwise` tag
_ELEMENT_WISE = {_aten.native_dropout.default, _aten.native_layer_norm.default,
                 _aten._to_copy.default, _aten.alias.default, _aten.detach.default}


def is_data_parallel(axis):
    """dp, and torchtitan's dp_replicate, dp_shard (and FSDP2's fsdp) axes."""
    return axis in ("dp", "fsdp") or axis.startswith("dp_")


def _model_parallel_axes(mesh):
    return [a for a, n in zip(mesh.axes, mesh.shape) if n > 1 and a != "pp"
            and not is_data_parallel(a)]


def holds_model_parallel_parameters(module, mesh):
    """Whether a parameter of `module` (or of a module inside it) is a DTensor on a mesh axis
    that is not data parallel: FSDP2 alone leaves activations whole but for the batch."""
    for p in module.parameters():
        if is_dtensor(p) and not all(map(is_data_parallel, mesh_axes_of(p.device_mesh, mesh))):
            return True
    return False


class Layouts:
    """The layouts of one rank's tensors: `of` answers for a tensor about to be recorded;
    `watch` installs the hooks that see parallel styles convert DTensors to plain tensors;
    `note_forward` learns the number of samples of each forward of the model."""

    def __init__(self, mesh, rank, placements=None, tp_axis="tp", zigzag_axes=()):
        self._mesh = mesh
        self._rank = rank
        self._sizes = dict(zip(mesh.axes, mesh.shape))
        self._coords = mesh.coords(rank)
        self._placements = placements
        self._tp_axis = tp_axis
        self._zigzag_axes = tuple(zigzag_axes)
        self._derived = WeakTensorKeyDictionary()  # plain tensor -> Layout
        self._own_outputs = {}  # id(module) -> its outputs before a style converted them
        self._in_region = None  # ids of modules inside a model-parallel region, from watch
        self._warned = set()
        self._propagation = _Propagation(self._derived)
        self.batch = None  # samples of the model's current forward on this rank

    # -- what the capture tells it -----------------------------------------------------------

    def note_forward(self, args, kwargs):
        """The model's forward starts: its first tensor argument's first dimension is the
        number of samples (tokens [batch, seq]; a pipeline stage's activations)."""
        first = next((a for a in itertools.chain(args, kwargs.values())
                      if isinstance(a, torch.Tensor) and a.dim() > 0), None)
        self.batch = None if first is None else int(first.shape[0])

    def watch(self, model):
        """Hooks on every module that converts its outputs (parallel styles, or any module with
        forward hooks of its own), around its own: returns the handles to remove. Called after
        the model was parallelized, so that these hooks run before and after the styles'."""
        if self._in_region is None:  # the model's structure: once
            self._in_region = {id(m) for name, m in model.named_modules()
                               if name and holds_model_parallel_parameters(m, self._mesh)}
            for m in model.modules():  # everything inside a model-parallel module is too
                if id(m) in self._in_region:
                    self._in_region.update(id(c) for c in m.modules())
        handles = []
        for module in model.modules():
            if not module._forward_hooks:
                continue
            handles.append(module.register_forward_hook(self._before_conversion, prepend=True))
            handles.append(module.register_forward_hook(self._after_conversion))
        return handles

    def propagating(self):
        """A context (a TorchDispatchMode) in which element-wise operators pass the layouts of
        their inputs to their outputs: the model's forward runs in it."""
        return self._propagation

    def same_as(self, new, old):
        """`new` is `old` under another name (a view the capture made of it)."""
        known = None if is_dtensor(old) else _known(self._derived, old)
        if known is not None:
            self._derived[new] = known

    def note_output(self, args, outputs):
        """A hooked module returned `outputs` for inputs `args`: a plain output of the shape of
        a plain input whose layout is known keeps that layout."""
        known = [(a, _known(self._derived, a)) for a in args
                 if isinstance(a, torch.Tensor) and not is_dtensor(a)]
        known = [(a, layout) for a, layout in known if layout is not None]
        for out in outputs:
            if not isinstance(out, torch.Tensor) or is_dtensor(out) or out in self._derived:
                continue
            match = next((layout for a, layout in known if a.shape == out.shape), None)
            if match is not None:
                self._derived[out] = match

    # -- layouts -----------------------------------------------------------------------------

    def of(self, name, kind, index, t, param=None, module=None, forward=None):
        """Layout of tensor `t` (kind `kind`, input or output `index`) of module or parameter
        `name`. module: the module it belongs to, for the warning's region test; forward: the
        layout of the forward tensor whose gradient `t` is."""
        label = f"{name} {kind}[{index}]"
        if is_dtensor(t):
            return dtensor_layout(t, self._mesh, self._rank, self._outer(kind, t), label)
        spec = self._placements(name, kind, index, t) if self._placements else None
        if isinstance(spec, Layout):
            return spec
        strides = None
        if spec is None:
            known = forward if forward is not None else _known(self._derived, t)
            if known is not None and _fits(known, t) and not _partial(known):
                return self._gradient_of(known, t) if kind in _GRADIENT_KINDS else known
            spec, strides = self._default_spec(kind, t, param)
            if kind in ACTIVATION_KINDS and module is not None and id(module) in (
                    self._in_region or ()):
                self._warn(name, label, t)
        return even_layout(tuple(t.shape), spec, self._sizes, self._coords, strides,
                           self._zigzag_axes)

    def sample_dim(self, name, kind, index, t, samples):
        """The dimension of activation `t` that holds the `samples` samples of the forward, for
        a perturbed reference that puts them back in the reference's order; None when `t` holds
        no samples. Raises where it cannot tell, rather than leave the samples out of order."""
        spec = self._placements(name, kind, index, t) if self._placements else None
        placements = spec.placements if isinstance(spec, Layout) else spec
        named = {a: p for a, p in (placements or {}).items() if is_data_parallel(a)}
        shard = next((p for p in named.values() if p and p.startswith("Shard(")), None)
        if shard is not None:
            dim = int(shard[len("Shard("):-1]) % max(t.dim(), 1)
            if t.shape[dim] != samples:
                raise ValueError(
                    f"{name} {kind}[{index}]: placements shards dimension {dim} over data "
                    f"parallelism, but it has {t.shape[dim]} entries, not the micro-batch's "
                    f"{samples} samples: the perturbed reference cannot put them back in the "
                    "reference's order")
            return dim
        if named:  # the callback says: a copy on every data-parallel rank, no samples
            return None
        if t.dim() > 0 and t.shape[0] == samples:
            return 0
        if samples in tuple(t.shape)[1:]:
            raise ValueError(
                f"{name} {kind}[{index}]: a dimension other than the first has the micro-batch's "
                f"{samples} samples (shape {list(t.shape)}): say which holds them, with "
                "placements returning a data-parallel Shard(d) (or Replicate) for it, so that the "
                "perturbed reference can put them back in the reference's order")
        return None

    # -- inside ------------------------------------------------------------------------------

    def _batched(self, t):
        return t.dim() > 0 and (self.batch is None or t.shape[0] == self.batch)

    def _over_data_parallel(self, kind, t):
        """The placement of activation `t` on the data-parallel axes: its batch split over them,
        or, without a batch dimension, a copy (its gradient a partial sum); None for other
        kinds."""
        if kind not in ACTIVATION_KINDS:
            return None
        if self._batched(t):
            return "Shard(0)"
        return "Partial(sum)" if kind in _GRADIENT_KINDS else "Replicate"

    def _outer(self, kind, t):
        """How the capture's mesh axes outside a DTensor's own mesh split it: activations over
        the data-parallel axes as _over_data_parallel says, everything else is a copy; a
        pipeline stage owns its tensors."""
        dp = self._over_data_parallel(kind, t) or "Replicate"
        return {a: dp if is_data_parallel(a) else "Replicate" for a in self._sizes if a != "pp"}

    def _gradient_of(self, layout, t):
        """The layout of gradient `t` of a tensor laid out as `layout`: the same, but for a
        copy over the data-parallel axes, whose gradient is a partial sum."""
        if self._batched(t) or not layout.placements:
            return layout
        placements = {a: "Partial(sum)" if is_data_parallel(a) and p == "Replicate" else p
                      for a, p in layout.placements.items()}
        return Layout(layout.global_shape, layout.ranges, placements)

    def _default_spec(self, kind, t, param):
        dp = self._over_data_parallel(kind, t)
        if dp is not None:
            return {a: dp for a in self._sizes if is_data_parallel(a)}, None
        if param is not None and getattr(param, "tensor_model_parallel", False):
            dim = getattr(param, "partition_dim", 0)
            stride = getattr(param, "partition_stride", 1)
            return {self._tp_axis: f"Shard({dim})"}, {self._tp_axis: stride}
        return {}, None

    def _before_conversion(self, module, args, output):
        self._own_outputs[id(module)] = _as_tuple(output)

    def _after_conversion(self, module, args, output):
        own = self._own_outputs.pop(id(module), ())
        for before, after in zip(own, _as_tuple(output)):
            if (is_dtensor(before) and isinstance(after, torch.Tensor) and not is_dtensor(after)
                    and after not in self._derived):
                layout = self._made_local(before, after)
                if layout is not None:
                    self._derived[after] = layout
                    if after._is_view() and after._base is not None \
                            and after._base.shape == after.shape:
                        # what views of `after` find as their base (FSDP2's input hooks)
                        self._derived[after._base] = layout

    def _made_local(self, dtensor, local):
        """The layout of `local`, what a style's output conversion made of `dtensor`
        (redistributed to some placements, then to_local): the placements that give its shape,
        the DTensor's own first, then a copy, then a shard of each dimension."""
        from torch.distributed.tensor import DTensor, Replicate, Shard

        options = [[p] + [Replicate()] + [Shard(d) for d in range(dtensor.dim())]
                   for p in dtensor.placements]
        for placements in itertools.product(*options):
            if any(p.is_partial() for p in placements):
                continue
            wrapped = DTensor.from_local(local.detach(), dtensor.device_mesh, placements,
                                         run_check=False, shape=dtensor.shape,
                                         stride=dtensor.stride())
            try:
                return dtensor_layout(wrapped, self._mesh, self._rank,
                                      self._outer("forward_output", local))
            except ValueError:
                continue
        return None

    def _warn(self, name, label, t):
        if name in self._warned:
            return
        self._warned.add(name)
        axes = ", ".join(_model_parallel_axes(self._mesh))
        warnings.warn(
            f"ttrace: cannot derive the layout of {label}, a plain tensor of shape "
            f"{list(t.shape)} inside a model-parallel region: it is recorded as whole on every "
            f"rank of mesh axes {axes}. If it is not, give its layout with "
            "Capture(placements=...), or leave the module out with Capture(modules=...).",
            stacklevel=2)


class _Propagation(TorchDispatchMode):
    """Passes the layout of an element-wise operator's input to its output of the same shape,
    as DTensor's rule for pointwise operators does."""

    def __init__(self, derived):
        super().__init__()
        self._derived = derived

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if torch.Tag.pointwise in func.tags or func in _ELEMENT_WISE:
            known = [(a, _known(self._derived, a)) for a in tree_leaves((args, kwargs))
                     if isinstance(a, torch.Tensor)]
            known = [(a, layout) for a, layout in known if layout is not None]
            for o in tree_leaves(out) if known else ():
                if isinstance(o, torch.Tensor) and o not in self._derived:
                    match = next((layout for a, layout in known if a.shape == o.shape), None)
                    if match is not None:
                        self._derived[o] = match
        return out


def _known(derived, t):
    """The derived layout of `t`, or of the tensor `t` is a view of with the same shape."""
    layout = derived.get(t)
    if layout is None and t._is_view() and t._base is not None and t._base.shape == t.shape:
        layout = derived.get(t._base)
    return layout


def _as_tuple(output):
    return tuple(output) if isinstance(output, (tuple, list)) else (output,)


def _fits(layout, t):
    local = tuple(t.shape)
    if layout.ranges is None:
        return tuple(layout.global_shape) == local
    return tuple(sum(b - a for a, b in dim) for dim in layout.ranges) == local


def _partial(layout):
    return any(p.startswith("Partial") for p in (layout.placements or {}).values())
