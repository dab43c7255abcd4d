"""Megatron-style parallel layers of the tiny GPT: the tensor/sequence-parallel communication
operators (Megatron's f, g and their sequence-parallel twins), column- and row-parallel
linears, the vocab-parallel embedding, the tied LM head and the vocab-parallel cross-entropy.
`par.bug` switches the silent bugs of bugs.py on where they live."""

import functools

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from fp8 import fp8_linear
from parallel import SEQ_DIM, all_gather, all_reduce, reduce_scatter



class CopyToTP(torch.autograd.Function):
    """f: identity forward, all-reduce of the input gradient over TP backward."""

    @staticmethod
    def forward(ctx, x, par, reduce_grad):
        ctx.par, ctx.reduce_grad = par, reduce_grad
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return (all_reduce(grad, ctx.par.tp_group) if ctx.reduce_grad else grad), None, None


class ReduceFromTP(torch.autograd.Function):
    """g: all-reduce over TP forward, identity backward."""

    @staticmethod
    def forward(ctx, x, par):
        return all_reduce(x, par.tp_group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GatherFromSP(torch.autograd.Function):
    """Sequence parallelism: all-gather of the sequence chunks forward, reduce-scatter of the
    gradient backward."""

    @staticmethod
    def forward(ctx, x, par):
        ctx.par = par
        return all_gather(x, par.tp_group, par.tp, SEQ_DIM,
                          reverse=par.bug == "sp_allgather_wrong_order")

    @staticmethod
    def backward(ctx, grad):
        par = ctx.par
        return reduce_scatter(grad, par.tp_group, par.tp, par.tp_rank, SEQ_DIM), None


class ScatterToSP(torch.autograd.Function):
    """Sequence parallelism: reduce-scatter along the sequence forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x, par):
        ctx.par = par
        return reduce_scatter(x, par.tp_group, par.tp, par.tp_rank, SEQ_DIM)

    @staticmethod
    def backward(ctx, grad):
        return all_gather(grad, ctx.par.tp_group, ctx.par.tp, SEQ_DIM), None


class GatherFromCP(torch.autograd.Function):
    """Context parallelism: the whole sequence, in global order, from every CP rank's zig-zag
    chunks (forward); the sum over CP ranks of the gradient, at this rank's positions
    (backward). The attention's keys and values need every position."""

    @staticmethod
    def forward(ctx, x, par):
        ctx.par = par
        gathered = all_gather(x, par.cp_group, par.cp, SEQ_DIM)
        order = torch.cat([par.zigzag_index(c) for c in range(par.cp)])
        return gathered.index_select(SEQ_DIM, order.argsort())

    @staticmethod
    def backward(ctx, grad):
        par = ctx.par
        mine = par.position_index()
        if par.bug == "cp_attn_backward_wrong_chunk":
            # contiguous chunk cp_rank of the sequence, as without zig-zag
            n = grad.shape[SEQ_DIM] // par.cp
            mine = torch.arange(par.cp_rank * n, (par.cp_rank + 1) * n)
        return all_reduce(grad, par.cp_group).index_select(SEQ_DIM, mine), None


def into_tp_region(x, par, reduce_grad=True):
    """The input of a column-parallel layer: gathered from the sequence chunks under SP."""
    if par.sp:
        return GatherFromSP.apply(x, par)
    return CopyToTP.apply(x, par, reduce_grad)


def out_of_tp_region(x, par):
    """The output of a row-parallel layer: summed over TP, scattered over the sequence under
    SP."""
    return ScatterToSP.apply(x, par) if par.sp else ReduceFromTP.apply(x, par)


# forward_input indices under which the TP linears record their fp8 GEMM operands (index 0 is
# the module's argument, recorded by the capture's hook in bf16)
FP8_INPUT, FP8_WEIGHT = 1, 2


class Fp8Operands:
    """The TP linears' GEMM, in fp8 under the fp8 recipes (fp8.py); `record` (set by train.py
    to the capture) receives each quantized operand: (index, fp8 tensor, scale_inv).
    `inner_split`: TP splits the GEMM's inner dimension, the operands' last (input features),
    so each rank holds part of every row."""

    record = None
    inner_split = False
    sequence_gathered = False  # the input is gathered from SP's sequence chunks

    def linear(self, x, weight, bias=None):
        if not self.par.fp8:
            return F.linear(x, weight, bias)
        record = [None if self.record is None else functools.partial(self.record, index)
                  for index in (FP8_INPUT, FP8_WEIGHT)]
        y = fp8_linear(x, weight, self.par, self.inner_split, *record,
                       sequence_gathered=self.sequence_gathered)
        return y if bias is None else y + bias


def tp_param(*local_shape, partition_dim=None, sequence_parallel=False):
    """A parameter with Megatron's attributes: split over TP along `partition_dim`, or
    replicated and used on sequence chunks (its gradient then needs a TP all-reduce)."""
    p = nn.Parameter(torch.empty(*local_shape))
    if partition_dim is not None:
        p.tensor_model_parallel, p.partition_dim, p.partition_stride = True, partition_dim, 1
    p.sequence_parallel = sequence_parallel
    return p


class LayerNorm(nn.LayerNorm):
    """A layer norm whose parameters are marked sequence-parallel under SP. It computes in
    fp32 and returns the input's dtype, as the GPU kernels of Megatron-LM (Apex,
    TransformerEngine) and torch do: torch's CPU kernel in bf16 sums the weight and bias
    gradients over the tokens in bf16, a round-off that grows with the tokens (8% at 16k) and
    no GPU run has (docs/thresholds.md, "Long low-precision reductions")."""

    def __init__(self, hidden, par):
        super().__init__(hidden)
        self.weight.sequence_parallel = self.bias.sequence_parallel = par.sp

    def forward(self, x):
        return F.layer_norm(x.float(), self.normalized_shape, self.weight.float(),
                            self.bias.float(), self.eps).to(x.dtype)


class ColumnParallelLinear(Fp8Operands, nn.Module):
    """Output features split over TP (weight Shard(0)); input gathered from SP."""

    def __init__(self, fan_in, fan_out, par, reduce_input_grad=True):
        super().__init__()
        self.par, self.reduce_input_grad = par, reduce_input_grad
        self.sequence_gathered = par.sp
        self.weight = tp_param(fan_out // par.tp, fan_in, partition_dim=0)
        self.bias = tp_param(fan_out // par.tp, partition_dim=0)

    def forward(self, x):
        x = into_tp_region(x, self.par, self.reduce_input_grad)
        return self.linear(x, self.weight, self.bias)


class RowParallelLinear(Fp8Operands, nn.Module):
    """Input features split over TP (weight Shard(1)); partial outputs summed (and scattered
    over the sequence under SP); the replicated bias is added once, after the sum."""

    inner_split = True

    def __init__(self, fan_in, fan_out, par):
        super().__init__()
        self.par = par
        self.weight = tp_param(fan_out, fan_in // par.tp, partition_dim=1)
        self.bias = tp_param(fan_out, sequence_parallel=par.sp)

    def forward(self, x):
        if self.par.bug == "row_bias_every_rank":
            return out_of_tp_region(self.linear(x, self.weight, self.bias), self.par)
        return out_of_tp_region(self.linear(x, self.weight), self.par) + self.bias


class VocabParallelEmbedding(nn.Module):
    """Vocabulary rows split over TP; tokens of other ranks' rows give zeros, and the partial
    embeddings are summed over TP (scattered over the sequence under SP)."""

    def __init__(self, vocab, hidden, par):
        super().__init__()
        self.par = par
        self.weight = tp_param(vocab // par.tp, hidden, partition_dim=0)

    def forward(self, tokens):
        n = self.weight.shape[0]
        start = self.par.tp_rank * n
        outside = (tokens < start) | (tokens >= start + n)
        out = F.embedding((tokens - start).masked_fill(outside, 0), self.weight)
        if self.par.bug != "embedding_no_vocab_mask":
            out = out.masked_fill(outside.unsqueeze(-1), 0)
        return out_of_tp_region(out, self.par)


class LMHead(nn.Module):
    """Logits split over the vocabulary (column-parallel) with the embedding's weight (tied:
    the embedding module is held without registering it twice)."""

    def __init__(self, par, embedding):
        super().__init__()
        self.par = par
        self._tied = (embedding,)

    def forward(self, x):
        return F.linear(into_tp_region(x, self.par), self._tied[0].weight)


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Megatron's cross-entropy over vocab-split logits, in fp32: the row maximum and the sum
    of exponentials are all-reduced over TP, the target's logit comes from the rank owning it."""

    @staticmethod
    def forward(ctx, logits, target, par):
        ctx.dtype = logits.dtype
        logits = logits.float()
        row_max = logits.max(dim=-1)[0]
        if par.bug != "cross_entropy_no_max_allreduce":
            row_max = all_reduce(row_max, par.tp_group, dist.ReduceOp.MAX)
        logits = logits - row_max.unsqueeze(-1)
        n = logits.shape[-1]
        start = par.tp_rank * n
        outside = (target < start) | (target >= start + n)
        local_target = (target - start).masked_fill(outside, 0)
        predicted = logits.gather(-1, local_target.unsqueeze(-1)).squeeze(-1)
        predicted = all_reduce(predicted.masked_fill(outside, 0), par.tp_group)
        exp = logits.exp()
        sum_exp = all_reduce(exp.sum(dim=-1), par.tp_group)
        ctx.save_for_backward(exp / sum_exp.unsqueeze(-1), local_target, outside)
        return torch.log(sum_exp) - predicted

    @staticmethod
    def backward(ctx, grad):
        softmax, local_target, outside = ctx.saved_tensors
        grad_logits = softmax.clone()
        hit = grad_logits.gather(-1, local_target.unsqueeze(-1)) - (~outside).float().unsqueeze(-1)
        grad_logits.scatter_(-1, local_target.unsqueeze(-1), hit)
        return (grad_logits * grad.unsqueeze(-1)).to(ctx.dtype), None, None


class VocabParallelCrossEntropy(nn.Module):
    """Per-token loss [batch, sequence] (fp32), the same on every TP rank."""

    def __init__(self, par):
        super().__init__()
        self.par = par

    def forward(self, logits, target):
        return _VocabParallelCrossEntropy.apply(logits, target, self.par)
