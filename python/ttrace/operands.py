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
with their placements, torchao's tensors still quantized. Forward only: the backward's GEMMs
(gradients quantized) run outside the module's forward."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .dtensor import is_dtensor
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


class GemmOperands(TorchDispatchMode):
    """Calls record(tensor) for each torchao-quantized operand of a matrix multiply run in it."""

    def __init__(self, record):
        super().__init__()
        self._record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in _GEMMS:
            for a in args:
                if isinstance(a, torch.Tensor) and is_torchao_quantized(a):
                    self._record(a)
        return func(*args, **(kwargs or {}))
