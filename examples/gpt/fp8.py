"""The fp8 recipes (`--dtype fp8`, `fp8_rowwise` and `mxfp8`): the tensor-parallel linears run
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
- `mxfp8`, MXFP8 (OCP Microscaling): one power-of-two scale (E8M0) per block of 32 consecutive
  elements along the GEMM's inner dimension, rounded up so that the block's largest element
  does not saturate (TransformerEngine's MXFP8 recipe). The GEMM is emulated: the operands
  dequantized, multiplied in fp32 and rounded to bf16, as torchao's emulated MX GEMM. Where TP
  splits the inner dimension inside a block (a row-parallel linear whose shard is narrower
  than 32), the block's amax is all-reduced over the TP group, so that every rank scales its
  part of the block as the whole block is scaled in the reference.

The capture records the quantized operands natively, as float8_e4m3fn tensors with the
scale_inv each rank used, one number or one per row (`record`): a shard quantized with its
own amax shows in its scales even where its values stay within the fp8 round-off."""

import torch
import torch.distributed as dist

from parallel import all_reduce

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448
AMAX_FLOOR = 1e-12
MX_BLOCK = 32  # elements per MX scale along the inner dimension


def mx_quantize(x, par, inner_split=False, record=None):
    """(x in fp8, scale_inv per element) under MXFP8: blocks of MX_BLOCK along x's last
    dimension, counted from the first element of the whole (unsplit) dimension, each scaled by
    the power of two that brings its amax to at most 448. When TP splits that dimension
    (`inner_split`), this rank holds elements [tp_rank * k, (tp_rank + 1) * k) of it, and a
    block it shares with other ranks takes their amax too (the bug mx_block_amax_not_reduced
    keeps this rank's part of the block). record(fp8 tensor, scale_inv per block, block), when
    given, receives the operand as the trace stores it: the blocks tiling this shard."""
    x = x.detach().float()
    k = x.shape[-1]
    offset = par.tp_rank * k if inner_split else 0
    # each local column's block of the whole dimension, and the blocks this shard touches
    blocks = (offset + torch.arange(k)) // MX_BLOCK
    first, count = int(blocks[0]), int(blocks[-1]) - int(blocks[0]) + 1
    whole = k * par.tp if inner_split else k
    amax = torch.zeros(*x.shape[:-1], -(-whole // MX_BLOCK))
    amax.scatter_reduce_(-1, blocks.expand_as(x), x.abs(), "amax")
    if inner_split and par.bug != "mx_block_amax_not_reduced":
        amax = all_reduce(amax, par.tp_group, dist.ReduceOp.MAX)
    amax = amax[..., first:first + count]
    # E8M0: 2^e with e the smallest integer keeping amax / 2^e <= 448; a block of zeros 1
    exponent = torch.ceil(torch.log2(amax.clamp(min=AMAX_FLOOR) / FP8_MAX)).clamp(-127, 127)
    scale_inv = torch.where(amax > 0, torch.exp2(exponent), torch.ones_like(amax))
    per_element = scale_inv[..., blocks - first]
    data = (x / per_element).to(FP8)
    if record is not None:
        # blocks tile the stored shard from its first element (trace-format.md): one block of
        # MX_BLOCK per row where the shard is narrower than that, else MX_BLOCK wide, aligned
        # with the whole dimension's as long as the shard starts on a block's first element
        assert offset % MX_BLOCK == 0 or count == 1, "a shard starting inside a block of several"
        record(data, scale_inv, block=(1,) * (x.dim() - 1) + (MX_BLOCK,), scale_format="e8m0")
    return data, per_element


def mx_quantize_weight(w, par, inner_split=False, record=None):
    """mx_quantize of a weight [out features, in features]: blocks along the inner dimension,
    the in features. The bug mx_scales_wrong_axis quantizes a column-parallel shard (TP splits
    the out features) as if it were still transposed: its blocks run along the out features;
    the GEMM dequantizes with them, so only the scales' layout shows it."""
    if par.bug == "mx_scales_wrong_axis" and par.tp > 1 and not inner_split:
        transposed = None if record is None else (
            lambda data, scale_inv, block, scale_format: record(
                data.t(), scale_inv.t(), block=block[::-1], scale_format=scale_format))
        data, per_element = mx_quantize(w.t(), par, False, transposed)
        return data.t(), per_element.t()
    return mx_quantize(w, par, inner_split, record)


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
        if sx.shape == x8.shape:  # MX: a scale per element, the GEMM emulated in fp32
            xd, wd = x8.float() * sx, w8.float() * sw
            ctx.save_for_backward(xd.to(x.dtype), wd.to(x.dtype))
            return (xd @ wd.t()).to(x.dtype)
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
    quantize_input, quantize_weight = (mx_quantize, mx_quantize_weight) if par.mx else (
        quantize, quantize)
    return Fp8Linear.apply(x, weight, quantize_input(x, par, inner_split, record_input),
                           quantize_weight(weight, par, inner_split, record_weight))
