"""The tiny GPT: vocab-parallel embedding, pre-norm transformer layers (causal self-attention
with column-parallel QKV and row-parallel output projection, column/row-parallel MLP, or a
mixture of experts in the last layer, hidden dropout), final norm, tied LM head and
vocab-parallel cross-entropy. One instance holds one
pipeline stage: the first stage has the embedding, the last the final norm, the head and the
loss (and a copy of the tied embedding weight)."""

import zlib
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from layers import (ColumnParallelLinear, GatherFromCP, LayerNorm, LMHead, RowParallelLinear,
                    VocabParallelCrossEntropy, VocabParallelEmbedding)

from moe import MoE

import ttrace

@dataclass(frozen=True)
class Sizes:
    """The model's sizes (train.py's --hidden, --layers, ... options); the defaults are the bug
    corpus's. The last layer's MLP is a mixture of `experts` experts."""
    vocab: int = 32
    hidden: int = 16
    heads: int = 2
    ffn: int = 32
    seq: int = 8
    layers: int = 2
    batch: int = 4  # global sequences per micro-batch
    experts: int = 4

    @property
    def moe_layers(self):
        return (self.layers - 1,)

    @property
    def head_dim(self):
        return self.hidden // self.heads


DROPOUT = 0.1
_KEEP_ABOVE = -1.2815516  # P(N(0,1) > this) = 1 - DROPOUT


def seed_of(name):
    return zlib.crc32(name.encode())


def dropout_mask(par, name, global_shape, index):
    """Keep-mask of `name`'s dropout for the current (iteration, micro-batch): the `index`
    slice of one global mask, so every layout drops the reference's elements. The bug
    dropout_tp_inconsistent seeds it per TP rank, as an RNG not forked consistently would."""
    iteration, micro_batch = par.rng_key
    seed = seed_of(name) + 1000 * iteration + micro_batch
    if par.bug == "dropout_tp_inconsistent" and name.endswith("drop1"):
        seed += 7919 * par.tp_rank
    return ttrace.consistent_randn(global_shape, seed, index) > _KEEP_ABOVE


def batch_rows(par):
    """This DP rank's sequences of a micro-batch, as (start, stop) ranges, in the order the
    rank processes them (a perturbed reference may reorder them: par.sample_order)."""
    if par.sample_order is not None:
        return [(r, r + 1) for r in par.sample_order]
    per_rank = par.sizes.batch // par.dp
    return [(par.dp_rank * per_rank, (par.dp_rank + 1) * per_rank)]


class HiddenDropout(nn.Module):
    """Dropout on [batch, sequence, hidden] activations outside the TP region: on this rank's
    context-parallel positions, replicated over TP, or on its sequence chunk under SP."""

    def __init__(self, par, name):
        super().__init__()
        self.par, self.name = par, name

    def forward(self, x):
        seq = self.par.positions
        if self.par.sp:  # (not combined with CP)
            seq = [(self.par.tp_rank * x.shape[1], (self.par.tp_rank + 1) * x.shape[1])]
        z = self.par.sizes
        keep = dropout_mask(self.par, self.name, (z.batch, z.seq, z.hidden),
                            [batch_rows(self.par), seq, [(0, z.hidden)]])
        return x * keep.to(x.dtype) * (1 / (1 - DROPOUT))


def split_heads(qkv, heads, head_dim):
    """q, k, v [batch, heads, sequence, head_dim] of a QKV projection laid out per head."""
    b, s, _ = qkv.shape
    return qkv.view(b, s, heads, 3, head_dim).permute(3, 0, 2, 1, 4)


class CoreAttention(nn.Module):
    """Causal softmax attention over this TP rank's heads. Input: the QKV projection laid out
    per head as [q, k, v]; output: the heads' contexts side by side. Under context
    parallelism the queries are this rank's zig-zag positions and the keys and values are
    gathered from every CP rank."""

    def __init__(self, par, name):
        super().__init__()
        self.par, self.name = par, name

    def forward(self, qkv):
        par, z = self.par, self.par.sizes
        b, s, width = qkv.shape
        heads = width // (3 * z.head_dim)
        q = split_heads(qkv, heads, z.head_dim)[0]
        _, k, v = split_heads(GatherFromCP.apply(qkv, par) if par.cp > 1 else qkv, heads,
                              z.head_dim)
        head_dim = z.head_dim
        if par.bug == "attn_scale_local_heads":
            head_dim = z.hidden // par.tp // z.heads  # global heads over a partition's width
        scores = (q @ k.transpose(-1, -2)).float() * head_dim**-0.5
        q_pos = par.position_index()
        if par.bug == "cp_causal_mask_local_positions":
            q_pos = torch.arange(s)  # the rank's local index taken for the global position
        causal = torch.arange(z.seq).unsqueeze(0) > q_pos.unsqueeze(1)
        probs = scores.masked_fill(causal, float("-inf")).softmax(dim=-1).to(qkv.dtype)
        first = par.tp_rank * heads
        keep = dropout_mask(par, self.name, (z.batch, z.heads, z.seq, z.seq),
                            [batch_rows(par), [(first, first + heads)], par.positions,
                             [(0, z.seq)]])
        probs = probs * keep.to(probs.dtype) * (1 / (1 - DROPOUT))
        return (probs @ v).permute(0, 2, 1, 3).reshape(b, s, heads * z.head_dim)


class SelfAttention(nn.Module):
    def __init__(self, par, name):
        super().__init__()
        hidden = par.sizes.hidden
        self.qkv = ColumnParallelLinear(hidden, 3 * hidden, par,
                                        reduce_input_grad=par.bug != "qkv_input_grad_no_allreduce")
        self.core = CoreAttention(par, name + ".core")
        self.proj = RowParallelLinear(hidden, hidden, par)

    def forward(self, x):
        return self.proj(self.core(self.qkv(x)))


class MLP(nn.Module):
    def __init__(self, par):
        super().__init__()
        z = par.sizes
        self.fc1 = ColumnParallelLinear(z.hidden, z.ffn, par)
        self.act = nn.GELU()
        self.fc2 = RowParallelLinear(z.ffn, z.hidden, par)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer layer; `layer` is its global number (it seeds the dropouts)."""

    def __init__(self, par, layer):
        super().__init__()
        name = f"layers.{layer}"
        z = par.sizes
        self.norm1 = LayerNorm(z.hidden, par)
        self.attn = SelfAttention(par, name + ".attn")
        self.drop1 = HiddenDropout(par, name + ".drop1")
        self.norm2 = LayerNorm(z.hidden, par)
        self.mlp = MoE(z.hidden, z.ffn, par) if layer in z.moe_layers else MLP(par)
        self.drop2 = HiddenDropout(par, name + ".drop2")

    def forward(self, x):
        x = x + self.drop1(self.attn(self.norm1(x)))
        return x + self.drop2(self.mlp(self.norm2(x)))


class GPT(nn.Module):
    """One pipeline stage holding global layers `layers` (all of them without PP). forward
    takes tokens on the first stage, the previous stage's hidden states on the others; the
    last stage returns the per-token loss."""

    def __init__(self, par, layers):
        super().__init__()
        self.par = par
        if par.first_stage or par.last_stage:
            self.embedding = VocabParallelEmbedding(par.sizes.vocab, par.sizes.hidden, par)
        self.layers = nn.ModuleList(Block(par, layer) for layer in layers)
        if par.last_stage:
            self.final_norm = LayerNorm(par.sizes.hidden, par)
            self.head = LMHead(par, self.embedding)
            self.loss = VocabParallelCrossEntropy(par)

    def forward(self, x, labels):
        if self.par.first_stage:
            x = self.embedding(x)
        for layer in self.layers:
            x = recomputed(layer, x, self.par) if self.par.ac else layer(x)
        if not self.par.last_stage:
            return x
        return self.loss(self.head(self.final_norm(x)), labels)


def recomputed(layer, x, par):
    """Megatron's full activation recompute: `layer`'s activations are dropped after its
    forward and recomputed in the backward. By then a pipeline schedule running all forwards
    first has moved the micro-batch's state on to the last micro-batch: the model-parallel RNG
    state that keys the dropout masks (par.rng_key) and the token ids the hash router reads.
    Like Megatron's tensor_parallel.checkpoint, the forward's state is restored for the
    recomputation. The bug recompute_rng_tracker_not_restored leaves the RNG state as it is,
    as torch.utils.checkpoint alone does (it restores torch's own RNG only)."""
    restored = ("token_ids",) if par.bug == "recompute_rng_tracker_not_restored" \
        else ("rng_key", "token_ids")
    forward_state = {name: getattr(par, name) for name in restored}

    def run(x):
        current = {name: getattr(par, name) for name in restored}
        for name, value in forward_state.items():
            setattr(par, name, value)
        try:
            return layer(x)
        finally:
            for name, value in current.items():
                setattr(par, name, value)

    return checkpoint(run, x, use_reentrant=False)


@torch.no_grad()
def init_weights(model, par, dtype, name_map):
    """Consistent generation: every shard is the slice of the global tensor drawn from the
    parameter's global name, so the reference and every layout hold the same weights."""
    for local, p in model.named_parameters():
        name = name_map(local)
        shape, index = list(p.shape), [slice(None)] * p.dim()
        if getattr(p, "tensor_model_parallel", False):
            d, n = p.partition_dim, p.shape[p.partition_dim]
            shape[d] *= par.tp
            index[d] = slice(par.tp_rank * n, (par.tp_rank + 1) * n)
        if name.endswith("bias"):
            scale = 0.2
        elif name == "embedding.weight":
            scale = 0.5
        else:
            scale = shape[-1] ** -0.5
        seed = seed_of(name)
        if par.bug == "moe_router_tp_unsynced" and name.endswith("router.weight"):
            seed += 7919 * par.tp_rank  # each TP rank initializes its own router
        values = ttrace.consistent_randn(shape, seed, tuple(index), scale=scale)
        if "norm" in name and name.endswith("weight"):
            values = 1 + values
        p.data = values.to(dtype)
