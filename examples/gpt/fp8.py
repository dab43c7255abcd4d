"""The fp8 recipes (`--dtype fp8` and `--dtype fp8_rowwise`): the tensor-parallel linears run
their GEMM in fp8. Inputs and weights are cast to torch.float8_e4m3fn with current scaling
(scale = 448 / amax) and multiplied by torch._scaled_mm, which accumulates in fp32 and returns
bf16, as TransformerEngine's and torchao's fp8 GEMMs do. The backward runs in bf16 on the
dequantized operands (no fp8 backward).

- `fp8`, per-tensor scaling, as in TransformerEngine: amax is all-reduced (max) over the ranks
  that hold parts of the same tensor, here every rank of the pipeline stage, so every shard is
  quantized with the scale of the whole tensor, as in the reference.
- `fp8_rowwise`, per-row scaling, as torchao's rowwise recipe: one scale per row of each
  operand (per token of the input, per output feature of the weight). Where TP splits each
  row, as it splits the row-parallel linears' inputs and weights along their input features,
  the row's amax is all-reduced over the TP group, so every row carries the scale of the whole
  row, as in the reference.

The capture records the quantized operands natively, as float8_e4m3fn tensors with the
scale_inv each rank used, one number or one per row (`record`): a shard quantized with its
own amax shows in its scales even where its values stay within the fp8 round-off."""

import torch
import torch.distributed as dist

from parallel import all_reduce

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448
AMAX_FLOOR = 1e-12


def quantize(x, par, inner_split=False, record=None):
    """(x in fp8, scale_inv): per tensor with the amax of the whole tensor (the bug
    fp8_amax_not_reduced keeps this rank's own); per row (par.fp8_rowwise) with the amax of
    each whole row along x's last dimension, reduced over TP when `inner_split` (the bug
    fp8_rowwise_amax_not_reduced keeps this rank's part of the row). record(fp8 tensor,
    scale_inv), when given, receives both."""
    x = x.detach().float()
    if par.fp8_rowwise:
        amax = x.abs().amax(dim=-1, keepdim=True)
        if inner_split and par.bug != "fp8_rowwise_amax_not_reduced":
            amax = all_reduce(amax, par.tp_group, dist.ReduceOp.MAX)
    else:
        amax = x.abs().max()
        if par.bug != "fp8_amax_not_reduced":
            amax = all_reduce(amax, par.amax_group, dist.ReduceOp.MAX)
    if par.fp8_rowwise:  # torchao's floor: a row of zeros gets a huge scale, not scale 1
        amax = amax.clamp(min=AMAX_FLOOR)
    scale = torch.where(amax > 0, FP8_MAX / amax, torch.ones_like(amax))
    # torch rounds to nearest even; the scale keeps |x * scale| <= 448, so nothing saturates
    data = (x * scale).to(FP8)
    scale_inv = (1.0 / scale).float()
    if record is not None:
        record(data, scale_inv if par.fp8_rowwise else float(scale_inv))
    return data, scale_inv


class Fp8Linear(torch.autograd.Function):
    """y = x @ w.T through fp8: forward by torch._scaled_mm on the quantized operands, backward
    in x's dtype on the dequantized ones (the straight-through of the quantization)."""

    @staticmethod
    def forward(ctx, x, weight, qx, qw):
        (x8, sx), (w8, sw) = qx, qw
        rows, k = x8.numel() // x8.shape[-1], x8.shape[-1]
        # per row: scale_a holds one scale per row of x, scale_b one per row of w, as [1, N]
        sx2, sw2 = (sx.reshape(rows, 1), sw.reshape(1, -1)) if sx.dim() else (sx, sw)
        y = torch._scaled_mm(x8.reshape(rows, k), w8.t(), scale_a=sx2, scale_b=sw2,
                             out_dtype=x.dtype)
        ctx.save_for_backward((x8.float() * sx).to(x.dtype), (w8.float() * sw).to(x.dtype))
        return y.reshape(*x8.shape[:-1], w8.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad @ weight
        grad_w = grad.reshape(-1, grad.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
        return grad_x, grad_w, None, None


def fp8_linear(x, weight, par, inner_split=False, record_input=None, record_weight=None):
    """The TP linears' GEMM in the fp8 recipes (without bias). inner_split: TP splits the inner
    dimension, so each rank holds part of every row of both operands (a row-parallel linear)."""
    return Fp8Linear.apply(x, weight, quantize(x, par, inner_split, record_input),
                           quantize(weight, par, inner_split, record_weight))
