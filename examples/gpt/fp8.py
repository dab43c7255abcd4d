"""Simulated fp8 (the `--dtype fp8` recipe): the inputs and weights of the tensor-parallel
linears are quantized to OCP FP8 E4M3 and dequantized again (in bf16) before the matmul, with
per-tensor current scaling: scale = 448 / amax. As in TransformerEngine, amax is all-reduced
(max) over the ranks that hold parts of the same tensor, here every rank of the pipeline
stage, so every shard is quantized with the scale of the whole tensor, as in the reference.
Gradients pass straight through (no fp8 backward).

The capture records the quantized operands natively, as fp8 bytes with the scale each rank
used (`record`): in per-tensor scaling every shard must carry the whole tensor's scale, so a
shard quantized with its own amax shows in its scale even where its values stay within the
fp8 round-off."""

import torch
import torch.distributed as dist

from parallel import all_reduce

E4M3_MAX = 448.0


def _round_e4m3(v):
    """Round-to-nearest-even onto the E4M3 grid (3 mantissa bits, subnormals below 2^-6),
    saturating at +-448. v: fp32."""
    exponent = torch.floor(torch.log2(v.abs())).clamp(min=-6)
    step = torch.pow(2.0, exponent - 3)
    return (torch.round(v / step) * step).clamp(-E4M3_MAX, E4M3_MAX)


def quantize(x, par, record=None):
    """x through fp8 and back, with the amax of the whole tensor (the bug fp8_amax_not_reduced
    keeps this rank's own). record(scaled, scale_inv), when given, receives the fp8 values
    (x times its scale, on the E4M3 grid) and the inverse scale that decodes them."""
    amax = x.detach().abs().max().float()
    if par.bug != "fp8_amax_not_reduced":
        amax = all_reduce(amax, par.amax_group, dist.ReduceOp.MAX)
    scale = E4M3_MAX / amax if amax > 0 else torch.tensor(1.0)
    scaled = _round_e4m3(x.detach().float() * scale)
    if record is not None:
        record(scaled, 1.0 / float(scale))
    q = (scaled / scale).to(x.dtype)
    return x + (q - x).detach()  # straight-through: the gradient of the identity
