"""How the capture stores tensors the training quantized: their fp8 or fp4 format and scales
(Fp8Storage), fp4 unpacked on its device, and torchao's quantized tensor subclasses
(Float8TrainingTensor: its fp8 training recipes; MXTensor: MXFP8, MXFP4; NVFP4Tensor) read off
their own fields, never dequantized, so that the trace keeps the words and scales the GEMM used.
The subclasses are recognized by their names and fields: ttrace does not import torchao."""

from typing import NamedTuple

import torch

from .dtensor import is_dtensor
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


TORCHAO_QUANTIZED = ("Float8TrainingTensor", "MXTensor", "NVFP4Tensor")


def is_torchao_quantized(t):
    """Whether `t` is one of torchao's quantized tensors, or a DTensor whose shard is one."""
    local = t._local_tensor if is_dtensor(t) else t
    return type(local).__name__ in TORCHAO_QUANTIZED


def torchao_quantized(t):
    """(values, Fp8Storage) for one of torchao's quantized tensors (TORCHAO_QUANTIZED), None
    for any other tensor. A DTensor whose shard is one gives a DTensor of the shard's values
    (so that its placements say where they sit) with the shard's scales."""
    if not is_dtensor(t):
        return _local_quantized(t)
    found = _local_quantized(t._local_tensor)
    if found is None:
        return None
    values, storage = found
    return type(t).from_local(values, t.device_mesh, t.placements, run_check=False,
                              shape=t.shape, stride=t.stride()), storage


def _local_quantized(t):
    kind = type(t).__name__
    if kind == "Float8TrainingTensor" and hasattr(t, "_data"):
        # torchao's fp8 training: _data = hp * _scale rounded to fp8, one scale per tensor or
        # per row ([rows, 1] or [1, cols]); decoded, as torchao does, by dividing by it
        data = t._data.detach()
        if data.dtype not in FP8_FORMATS:
            raise ValueError(f"a torchao {kind} of {data.dtype}: the trace stores fp8 "
                             "elements only")
        return data, Fp8Storage(FP8_FORMATS[data.dtype],
                                t._scale.detach().to(torch.float64).reciprocal())
    if kind not in ("MXTensor", "NVFP4Tensor") or not hasattr(t, "qdata"):
        return None
    if getattr(t, "is_swizzled_scales", False):
        raise ValueError(f"a torchao {kind} whose scales are swizzled (laid out for a GEMM "
                         "kernel's tiles): record it before it is prepared for the kernel")
    qdata, scale = t.qdata.detach(), t.scale.detach()
    if is_dtensor(scale):
        # an MXTensor made of a DTensor (torchao's MXFP8Linear under tensor parallelism) holds
        # DTensors: the words keep their placements, the scales are this shard's blocks
        scale = scale.to_local()
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
    local = values.to_local() if is_dtensor(values) else values
    block = tuple(t.block_size if s != n else 1 for n, s in zip(local.shape, scale.shape))
    tensor_scale = getattr(t, "per_tensor_scale", None)
    if tensor_scale is not None and tensor_scale.numel() != 1:
        raise ValueError(f"a torchao {kind} with {tensor_scale.numel()} per-tensor scales (one "
                         "per expert?): the trace stores one per tensor; record each alone")
    return values, Fp8Storage(
        fmt, scale.float(), block, "e8m0" if kind == "MXTensor" else "e4m3",
        None if tensor_scale is None else tensor_scale.detach().float())
