"""The operands of the GEMMs a module quantizes inside, recorded as the GEMM reads them.

torchao's low-precision training quantizes a linear's input and weight inside its forward:
Float8Linear (torchao.float8, torchtitan's fp8 recipes: tensorwise, rowwise), MXFP8Linear
(torchao.prototype.moe_training, torchtitan's MXFP8 linears) and a linear whose weight torchao's
`quantize_` wrapped for fp8 or MXFP8 training. No hook sees those operands. While such a module
runs forward, GemmOperands, a dispatch mode, watches its matrix multiplies and hands every
operand that is a torchao quantized tensor (ttrace.quantized) to `record`, in the order the
GEMM takes them: the words and scales it reads, not a quantization redone after the fact, so
that a fault in how they were made (an amax not reduced over a shard) is what the trace holds.

Watched below autograd, where a tensor subclass's own dispatch has not yet run: DTensors arrive
with their placements, torchao's tensors still quantized. The backward's GEMMs run outside the
module's forward, on the autograd engine's thread: the same mode is entered there around the
backward of the autograd function the forward made (`gemm_functions`, a hook before and after
that one node, which runs whole on one thread), and numbers the operands by their place in
the backward's two GEMMs (`BACKWARD_OPERANDS`).

An operand is laid out as what it was made from: the GEMM's [tokens, features] view of the
module's [batch, sequence, features] argument takes the argument's layout with its leading
dimensions flattened (`flattened`; a DTensor its own placements, and the argument's on the mesh
axes outside its mesh: a data-parallel batch split), a plain weight the parameter's
(`transposed` where the GEMM takes it so)."""

import math
import re
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .dtensor import is_dtensor
from .placement import Layout
from .quantized import is_torchao_quantized

_aten = torch.ops.aten
_GEMMS = {_aten.mm, _aten.addmm, _aten.bmm, _aten.baddbmm}  # what matmul and linear become


def _from_torchao(cls):
    return cls.__module__.startswith("torchao.")


def quantizes_inside(module):
    """Whether `module` is one of torchao's training modules (a class of torchao's, or a
    subclass of one, as torchtitan's Float8Linear and MXFP8Linear are), or holds a parameter
    torchao wrapped (quantize_ with Float8TrainingOpConfig or MXFP8TrainingOpConfig)."""
    if any(_from_torchao(cls) for cls in type(module).__mro__):
        return True
    for p in module.parameters(recurse=False):
        local = p._local_tensor if is_dtensor(p) else p
        if _from_torchao(type(local)) or _from_torchao(type(getattr(local, "data", local))):
            return True
    return False


def gradient_operand_format(model):
    """"fp8_e5m2" when a torchao Float8Linear of `model` casts its output gradients to e5m2
    (its tensorwise recipe, "hybrid" fp8), coarser than the forward's e4m3; else None. The
    manifest says it (dtype.grad_operands), and the checker's bound on gradients takes it."""
    for module in model.modules():
        cast = getattr(getattr(module, "config", None), "cast_config_grad_output", None)
        if (quantizes_inside(module) and getattr(cast, "target_dtype", None) == torch.float8_e5m2
                and getattr(cast.scaling_type, "name", "") != "DISABLED"):
            return "fp8_e5m2"
    return None


class GemmOperands(TorchDispatchMode):
    """Calls record(tensor, gemm, position) for each torchao-quantized operand of a matrix
    multiply run in it: `gemm` counts the GEMMs run in it from 0, `position` is 0 for the
    GEMM's left matrix and 1 for its right one (addmm's bias aside). GEMMs run while
    `passes_over()` says so are passed over, not counted: around a backward, those of a
    forward recomputed inside it (activation checkpointing unpacking the saved tensors; grad
    mode cannot tell, torchao's GEMMs run inside an autograd function's forward)."""

    def __init__(self, record, passes_over=None):
        super().__init__()
        self._record = record
        self._passes_over = passes_over
        self._gemms = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in _GEMMS and not (self._passes_over and self._passes_over()):
            matrices = args[-2:] if func.overloadpacket in (_aten.addmm, _aten.baddbmm) \
                else args[:2]
            for position, a in enumerate(matrices):
                if isinstance(a, torch.Tensor) and is_torchao_quantized(a):
                    self._record(a, self._gemms, position)
            self._gemms += 1
        return func(*args, **(kwargs or {}))


# The autograd functions of torchao's training linears (Float8Linear and quantize_'s fp8 weight;
# MXFP8Linear and quantize_'s MXFP8 weight), whose backward runs two GEMMs on quantized
# operands: grad_input = grad_output @ weight, grad_weight = grad_output^T @ input.
_GEMM_FUNCTIONS = {"matmul_with_hp_or_float8_args", "mx_mm"}

# What each operand of those two GEMMs is, by (gemm, position): the module tensor it is a view
# of, and whether the GEMM takes that view transposed. "output" is the gradient reaching the
# module's output, [tokens, out] as the GEMM reads it; "input" the module's argument,
# [tokens, in]; "weight" the weight, [out, in].
BACKWARD_OPERANDS = {(0, 0): ("output", False), (0, 1): ("weight", False),
                     (1, 0): ("output", True), (1, 1): ("input", False)}


def gemm_functions(outputs, inputs, depth=8):
    """The autograd nodes of torchao's GEMM functions a module's forward made: searched from
    its `outputs`' grad_fn back toward its `inputs`', never past one found (the modules
    before made theirs), at most `depth` nodes deep."""
    # by id, every node held: a node's Python object, and so its id, lasts while it is held
    stop = {id(n): n for n in (t.grad_fn for t in inputs if isinstance(t, torch.Tensor))
            if n is not None}
    frontier = [t.grad_fn for t in outputs if isinstance(t, torch.Tensor)]
    seen, found = {}, []
    for _ in range(depth):
        following = []
        for node in frontier:
            if node is None or id(node) in seen or id(node) in stop:
                continue
            seen[id(node)] = node
            cls = getattr(node, "_forward_cls", None)
            if cls is not None and _from_torchao(cls) and cls.__name__ in _GEMM_FUNCTIONS:
                found.append(node)
                continue
            following += [n for n, _ in node.next_functions]
        frontier = following
    return found


class OperandSource(NamedTuple):
    """The module tensor a GEMM operand is a view of: its `kind` and `index` (the capture's
    naming), `leading`, the leading dimensions the operand's first flattens (batch, sequence),
    and whether the GEMM takes that view `transposed` ([features, tokens])."""
    kind: str
    index: int
    leading: tuple
    transposed: bool = False


_SHARD = re.compile(r"^Shard\((\d+)\)$")


def _moved(placements, dim):
    """`placements` with each Shard(d) on Shard(dim(d)); None when one is a strided shard,
    which a view that moves dimensions cannot say."""
    out = {}
    for axis, p in (placements or {}).items():
        m = _SHARD.match(p)
        if m is None and p.startswith("_StridedShard"):
            return None
        out[axis] = p if m is None else f"Shard({dim(int(m.group(1)))})"
    return out


def flattened(layout, merged):
    """The layout of a tensor laid out as `layout` with its first `merged` dimensions flattened
    into one, row-major: the ranges of the flat dimension are every run of consecutive
    elements the shard holds; a shard of any merged dimension is a shard of the flat one.
    None where a placement cannot follow (a strided shard)."""
    if merged == 1:
        return layout
    placements = _moved(layout.placements, lambda d: 0 if d < merged else d - merged + 1)
    if placements is None:
        return None
    shape = tuple(layout.global_shape)
    flat_shape = (math.prod(shape[:merged]),) + shape[merged:]
    if layout.ranges is None:
        return Layout(flat_shape, None, placements)
    runs = [(0, 1)]  # of the dimensions flattened so far, in their own flat index
    for n, intervals in zip(shape[:merged], layout.ranges[:merged]):
        runs = [(i * n + a, i * n + b) for start, stop in runs for i in range(start, stop)
                for a, b in intervals]
    joined = []
    for a, b in runs:
        if joined and joined[-1][1] == a:
            joined[-1] = (joined[-1][0], b)
        elif b > a:
            joined.append((a, b))
    return Layout(flat_shape, [joined] + list(layout.ranges[merged:]), placements)


def transposed(layout):
    """The layout of the transpose of a 2-D tensor laid out as `layout`."""
    placements = _moved(layout.placements, lambda d: 1 - d)
    if placements is None:
        return None
    ranges = None if layout.ranges is None else list(reversed(layout.ranges))
    return Layout(tuple(reversed(layout.global_shape)), ranges, placements)


def flattened_argument(args, operand):
    """(index, leading dimensions) of the first of a module's arguments `args` that GEMM
    operand `operand` is a view of with those dimensions flattened, or None."""
    for i, argument in enumerate(args):
        merged = leading_dims_flattened(operand, argument)
        if merged is not None:
            return i, merged
    return None


def leading_dims_flattened(operand, argument):
    """How many leading dimensions of `argument` the GEMM operand `operand` flattens into its
    first (1: the same shape), or None when it is no such view of it."""
    if not isinstance(argument, torch.Tensor) or argument.numel() != operand.numel():
        return None
    merged = argument.dim() - operand.dim() + 1
    if merged < 1 or operand.dim() < 1:
        return None
    shape = tuple(argument.shape)
    return merged if (math.prod(shape[:merged]),) + shape[merged:] == tuple(operand.shape) \
        else None
