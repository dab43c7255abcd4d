"""The fp8 recipe (`--dtype fp8`): the tensor-parallel linears run their GEMM in fp8. Inputs and
weights are cast to torch.float8_e4m3fn with per-tensor current scaling (scale = 448 / amax)
and multiplied by torch._scaled_mm, which accumulates in fp32 and returns bf16, as
TransformerEngine's fp8 GEMMs do. As in TransformerEngine, amax is all-reduced (max) over the
ranks that hold parts of the same tensor, here every rank of the pipeline stage, so every
shard is quantized with the scale of the whole tensor, as in the reference. The backward runs
in bf16 on the dequantized operands (no fp8 backward).

The capture records the quantized operands natively, as float8_e4m3fn tensors with the
scale_inv each rank used (`record`): in per-tensor scaling every shard must carry the whole
tensor's scale, so a shard quantized with its own amax shows in its scale even where its
values stay within the fp8 round-off."""

import torch
import torch.distributed as dist

from parallel import all_reduce

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448


def quantize(x, par, record=None):
    """(x in fp8, scale_inv) with the amax of the whole tensor (the bug fp8_amax_not_reduced
    keeps this rank's own); record(fp8 tensor, scale_inv), when given, receives both."""
    amax = x.detach().abs().max().float()
    if par.bug != "fp8_amax_not_reduced":
        amax = all_reduce(amax, par.amax_group, dist.ReduceOp.MAX)
    scale = FP8_MAX / amax if amax > 0 else torch.tensor(1.0)
    # torch rounds to nearest even; the scale keeps |x * scale| <= 448, so nothing saturates
    data = (x.detach().float() * scale).to(FP8)
    scale_inv = (1.0 / scale).float()
    if record is not None:
        record(data, float(scale_inv))
    return data, scale_inv


class Fp8Linear(torch.autograd.Function):
    """y = x @ w.T through fp8: forward by torch._scaled_mm on the quantized operands, backward
    in x's dtype on the dequantized ones (the straight-through of the quantization)."""

    @staticmethod
    def forward(ctx, x, weight, qx, qw):
        (x8, sx), (w8, sw) = qx, qw
        rows = x8.reshape(-1, x8.shape[-1])
        y = torch._scaled_mm(rows, w8.t(), scale_a=sx, scale_b=sw, out_dtype=x.dtype)
        ctx.save_for_backward((x8.float() * sx).to(x.dtype), (w8.float() * sw).to(x.dtype))
        return y.reshape(*x8.shape[:-1], w8.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad @ weight
        grad_w = grad.reshape(-1, grad.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
        return grad_x, grad_w, None, None


def fp8_linear(x, weight, par, record_input=None, record_weight=None):
    """The TP linears' GEMM in the fp8 recipe (without bias)."""
    return Fp8Linear.apply(x, weight, quantize(x, par, record_input),
                           quantize(weight, par, record_weight))
