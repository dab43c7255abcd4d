"""How the capture stores tensors the training quantized: their fp8 or fp4 format and scales
(Fp8Storage), fp4 unpacked on its device, and torchao's microscaling tensor subclasses
(MXTensor: MXFP8, MXFP4; NVFP4Tensor) read off their own fields, never dequantized, so that the
trace keeps the words and scales the GEMM used. The subclasses are recognized by their names and
fields: ttrace does not import torchao."""

from typing import NamedTuple

import torch

from .writer import FP4_VALUES

FP8_FORMATS = {torch.float8_e4m3fn: "fp8_e4m3", torch.float8_e5m2: "fp8_e5m2"}


class Fp8Storage(NamedTuple):
    """How a tensor the training quantized is stored: its fp8 or fp4 format, its scale_inv
    (one number, or an array of one per block), the block where it is not the smallest that
    tiles the tensor, the format the recipe kept its scales in (None, "e8m0": MX's powers of
    two, or "e4m3": NVFP4's block scales), and NVFP4's per-tensor scale (trace-format.md)."""
    format: str
    scale_inv: object
    block: tuple = None
    scale_format: str = None
    tensor_scale_inv: float = None


_FP4_TABLES = {}  # device -> e2m1's values there: made once, a host-to-device copy waits


def unpack_fp4_tensor(packed):
    """The values of a torch.float4_e2m1fn_x2 tensor as bfloat16 (which holds every e2m1
    value exactly, in the bytes of any bf16 activation), on its device, without a copy to the
    host: two a byte along the last dimension, the first in the low nibble."""
    bits = packed.detach().view(torch.uint8)
    codes = torch.stack([bits & 0xF, bits >> 4], dim=-1).flatten(-2).long()
    table = _FP4_TABLES.get(bits.device)
    if table is None:
        table = _FP4_TABLES.setdefault(
            bits.device, torch.tensor(FP4_VALUES, dtype=torch.bfloat16, device=bits.device))
    values = table[codes & 0x7]
    return torch.where((codes & 0x8) != 0, -values, values)


def microscaled(t):
    """(values, Fp8Storage) for a torchao MXTensor or NVFP4Tensor: its elements (fp8 as they
    are, fp4 unpacked to their values), its block scales with the block they cover (its
    `block_size` along the dimension the scales are fewer in), their format (MX's E8M0,
    NVFP4's E4M3) and NVFP4's per-tensor scale; None for any other tensor."""
    kind = type(t).__name__
    if kind not in ("MXTensor", "NVFP4Tensor") or not hasattr(t, "qdata"):
        return None
    if getattr(t, "is_swizzled_scales", False):
        raise ValueError(f"a torchao {kind} whose scales are swizzled (laid out for a GEMM "
                         "kernel's tiles): record it before it is prepared for the kernel")
    qdata, scale = t.qdata.detach(), t.scale.detach()
    elements = getattr(t, "elem_dtype", torch.float4_e2m1fn_x2)  # NVFP4Tensor: always fp4
    if qdata.dtype in FP8_FORMATS:
        values, fmt = qdata, FP8_FORMATS[qdata.dtype]
    elif elements == torch.float4_e2m1fn_x2:  # two a byte along the last dimension
        if qdata.dim() > 1 and qdata.stride(-2) < qdata.stride(-1):
            raise ValueError(f"a transposed torchao {kind} of fp4: its bytes pair elements "
                             "along another dimension than its last; record it untransposed")
        values, fmt = unpack_fp4_tensor(qdata.view(torch.float4_e2m1fn_x2)), "fp4_e2m1"
    else:
        raise ValueError(f"a torchao {kind} of {elements}: the trace stores fp8 and fp4 "
                         "elements only")
    if values.dim() != scale.dim():
        raise ValueError(f"a torchao {kind} of shape {tuple(values.shape)} with scales of "
                         f"shape {tuple(scale.shape)}: one scale per block, in as many "
                         "dimensions, is what the trace stores")
    block = tuple(t.block_size if s != n else 1 for n, s in zip(values.shape, scale.shape))
    tensor_scale = getattr(t, "per_tensor_scale", None)
    if tensor_scale is not None and tensor_scale.numel() != 1:
        raise ValueError(f"a torchao {kind} with {tensor_scale.numel()} per-tensor scales (one "
                         "per expert?): the trace stores one per tensor; record each alone")
    return values, Fp8Storage(
        fmt, scale.float(), block, "e8m0" if kind == "MXTensor" else "e4m3",
        None if tensor_scale is None else tensor_scale.detach().float())
