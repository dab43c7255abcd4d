"""The low-precision recipes (`--dtype fp8`, `fp8_rowwise`, `mxfp8` and `nvfp4`): the
tensor-parallel linears run their GEMM in fp8 or fp4. Inputs and weights are cast to torch.float8_e4m3fn with current scaling
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
- `nvfp4`, NVFP4 (TransformerEngine's recipe for Blackwell): fp4 e2m1 elements, one E4M3 scale
  per block of 16 along the inner dimension and one fp32 scale per tensor (amax / (6 * 448),
  reduced like the per-tensor fp8 recipe's amax), emulated as MXFP8 is. Under SP a
  column-parallel input is quantized before the all-gather (TransformerEngine gathers it in
  fp4), so every rank's sequence chunk must be quantized with the whole tensor's scale.

The capture records the quantized operands natively, as float8_e4m3fn tensors with the
scale_inv each rank used, one number or one per row or block (`record`; NVFP4's as fp4 with its
tensor scale): a shard quantized with its own amax shows in its scales even where its values
stay within the fp8 round-off."""

from typing import NamedTuple

import torch
import torch.distributed as dist

from parallel import SEQ_DIM, all_reduce

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448
FP4_MAX = 6.0  # e2m1's largest
AMAX_FLOOR = 1e-12


class BlockFormat(NamedTuple):
    """A microscaling recipe: elements per scale along the inner dimension, the element
    format's largest value, the format of the block scales, and whether a per-tensor fp32
    scale sits above them."""
    block: int
    element_max: float
    scale_format: str
    tensor_scale: bool


MXFP8 = BlockFormat(32, FP8_MAX, "e8m0", False)
NVFP4 = BlockFormat(16, FP4_MAX, "e4m3", True)


def round_e2m1(x):
    """x rounded to the nearest fp4 e2m1 value (ties to even), saturating at 6: steps of 0.5
    below 2, 1 below 4, 2 up to 6 (torch.round rounds ties to even, as the codes' parity)."""
    mag = x.abs().clamp(max=FP4_MAX)
    step = torch.where(mag < 2, 0.5, torch.where(mag < 4, 1.0, 2.0))
    return torch.copysign(torch.round(mag / step) * step, x)


def block_scale_inv(amax, fmt, tensor_scale_inv):
    """Each block's scale_inv from its amax. MXFP8 (E8M0): 2^e with e the smallest integer
    keeping amax / 2^e <= 448, rounded up as TransformerEngine's MXFP8; NVFP4 (E4M3): amax / 6
    in units of the tensor's scale, rounded to the nearest e4m3. A block of zeros (or one too
    small for an e4m3 scale) gets 1."""
    if fmt.scale_format == "e8m0":
        exponent = torch.ceil(torch.log2(amax.clamp(min=AMAX_FLOOR) / FP8_MAX)).clamp(-127, 127)
        return torch.where(amax > 0, torch.exp2(exponent), torch.ones_like(amax))
    scale = (amax / fmt.element_max / tensor_scale_inv).to(FP8).float()
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def tensor_scale_of(amax):
    """NVFP4's per-tensor fp32 scale_inv of a tensor whose amax is `amax`: amax / (6 * 448),
    so that the largest block's e4m3 scale is at most 448; 1 for a tensor of zeros."""
    return torch.where(amax > 0, amax / (FP4_MAX * FP8_MAX), torch.ones_like(amax)).float()


def tensor_scales(x, par, sequence_gathered):
    """(the tensor scale_inv each element of x was quantized with, the one this rank
    dequantizes it with). Both are the whole tensor's, its amax reduced over the ranks holding
    parts of it as the per-tensor fp8 recipe's. Under SP a column-parallel input is quantized
    before the all-gather (TransformerEngine's low-precision all-gather): the bug
    nvfp4_gather_amax_not_reduced quantizes each rank's sequence chunk with that chunk's own
    amax, and this rank dequantizes every gathered chunk with its own chunk's scale."""
    if sequence_gathered and par.bug == "nvfp4_gather_amax_not_reduced":
        chunks = x.chunk(par.tp, SEQ_DIM)
        own = [tensor_scale_of(c.abs().max()) for c in chunks]
        quantized_with = torch.cat([torch.full_like(c[..., :1], float(t))
                                    for c, t in zip(chunks, own)], SEQ_DIM)
        return quantized_with, own[par.tp_rank]
    whole = tensor_scale_of(all_reduce(x.abs().max(), par.amax_group, dist.ReduceOp.MAX))
    return whole, whole


def block_quantize(x, par, inner_split=False, record=None, sequence_gathered=False):
    """(x's elements, scale_inv per element) under the block recipe par.block_format: blocks
    of fmt.block along x's last dimension, counted from the first element of the whole
    (unsplit) dimension, each scaled so that its amax fits the element format (MXFP8: fp8
    e4m3 elements; NVFP4: fp4 e2m1 values, as floats). When TP splits that dimension
    (`inner_split`), this rank holds elements [tp_rank * k, (tp_rank + 1) * k) of it, and a
    block it shares with other ranks takes their amax too (the bug mx_block_amax_not_reduced
    keeps this rank's part of the block). `sequence_gathered`: x is a column-parallel input
    gathered from the sequence chunks under SP (tensor_scales). record(elements, scale_inv per
    block, block, scale_format[, tensor_scale_inv]), when given, receives the operand as the
    trace stores it: the blocks tiling this shard."""
    fmt = par.block_format
    x = x.detach().float()
    k = x.shape[-1]
    offset = par.tp_rank * k if inner_split else 0
    # each local column's block of the whole dimension, and the blocks this shard touches
    blocks = (offset + torch.arange(k)) // fmt.block
    first, count = int(blocks[0]), int(blocks[-1]) - int(blocks[0]) + 1
    whole = k * par.tp if inner_split else k
    amax = torch.zeros(*x.shape[:-1], -(-whole // fmt.block))
    amax.scatter_reduce_(-1, blocks.expand_as(x), x.abs(), "amax")
    if inner_split and par.bug != "mx_block_amax_not_reduced":
        amax = all_reduce(amax, par.tp_group, dist.ReduceOp.MAX)
    amax = amax[..., first:first + count]
    one = torch.tensor(1.0)
    quantized_with, tensor = tensor_scales(x, par, sequence_gathered) if fmt.tensor_scale else (
        one, one)
    scale_inv = block_scale_inv(amax, fmt, quantized_with)
    scaled = x / (scale_inv[..., blocks - first] * quantized_with)
    data = scaled.to(FP8) if fmt.element_max == FP8_MAX else round_e2m1(scaled)
    per_element = scale_inv[..., blocks - first] * tensor
    if record is not None:
        # blocks tile the stored shard from its first element (trace-format.md): one block of
        # fmt.block per row where the shard is narrower than that, else fmt.block wide,
        # aligned with the whole dimension's as long as the shard starts on a block's first
        # element
        assert offset % fmt.block == 0 or count == 1, "a shard starting inside a block of several"
        extra = {"tensor_scale_inv": float(tensor)} if fmt.tensor_scale else {}
        record(data, scale_inv, block=(1,) * (x.dim() - 1) + (fmt.block,),
               scale_format=fmt.scale_format, **extra)
    return data, per_element


def block_quantize_weight(w, par, inner_split=False, record=None):
    """block_quantize of a weight [out features, in features]: blocks along the inner
    dimension, the in features. The bug mx_scales_wrong_axis quantizes a column-parallel shard
    (TP splits the out features) as if it were still transposed: its blocks run along the out
    features; the GEMM dequantizes with them, so only the scales' layout shows it."""
    if par.bug == "mx_scales_wrong_axis" and par.tp > 1 and not inner_split:
        transposed = None if record is None else (
            lambda data, scale_inv, block, **kw: record(
                data.t(), scale_inv.t(), block=block[::-1], **kw))
        data, per_element = block_quantize(w.t(), par, False, transposed)
        return data.t(), per_element.t()
    return block_quantize(w, par, inner_split, record)


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


def fp8_linear(x, weight, par, inner_split=False, record_input=None, record_weight=None,
               sequence_gathered=False):
    """The TP linears' GEMM in the fp8 and fp4 recipes (without bias). inner_split: TP splits
    the inner dimension, so each rank holds part of every row of both operands (a row-parallel
    linear); sequence_gathered: x was gathered from the sequence chunks under SP."""
    if par.block_format:
        qx = block_quantize(x, par, inner_split, record_input, sequence_gathered)
        qw = block_quantize_weight(weight, par, inner_split, record_weight)
    else:
        qx = quantize(x, par, inner_split, record_input)
        qw = quantize(weight, par, inner_split, record_weight)
    return Fp8Linear.apply(x, weight, qx, qw)
