"""A small Llama-style model written as torchtitan writes its models, so that torch's own
parallel APIs apply to it unchanged: RMSNorm, rotary positions, grouped-query attention and a
SwiGLU feed-forward, layers in a ModuleDict keyed by their global number (a pipeline stage
deletes the others and keeps global names), and modules that may be None on a stage.

Weights are drawn per parameter from its global name (ttrace.consistent_randn), so every
process builds the same full model before parallelizing it, whatever its layout."""

import zlib
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import ttrace



@dataclass(frozen=True)
class Sizes:
    """The model's sizes (train.py's --dim, --layers, ...). The defaults keep the detection
    test quick; the vocabulary of 62 makes FSDP2 shard its rows unevenly (16 and 15)."""
    dim: int = 32
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 64
    layers: int = 2
    vocab: int = 62
    seq: int = 16

    @property
    def head_dim(self):
        return self.dim // self.heads


def rotary(x, cos, sin):
    """Rotary position embedding of x (batch, seq, heads, head_dim): pairs of halves rotated by
    each position's angles."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.head_dim = hd = sizes.head_dim
        self.wq = nn.Linear(sizes.dim, sizes.heads * hd, bias=False)
        self.wk = nn.Linear(sizes.dim, sizes.kv_heads * hd, bias=False)
        self.wv = nn.Linear(sizes.dim, sizes.kv_heads * hd, bias=False)
        self.wo = nn.Linear(sizes.heads * hd, sizes.dim, bias=False)
        angles = torch.outer(torch.arange(sizes.seq, dtype=torch.float32),
                             10000.0 ** (-torch.arange(0, hd, 2) / hd))
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        batch, seq = x.shape[0], x.shape[1]
        # -1: the heads this rank holds (all of them, or its tensor-parallel share)
        q = self.wq(x).view(batch, seq, -1, self.head_dim)
        k = self.wk(x).view(batch, seq, -1, self.head_dim)
        v = self.wv(x).view(batch, seq, -1, self.head_dim)
        cos, sin = self.cos[:seq].to(q.dtype), self.sin[:seq].to(q.dtype)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        groups = q.shape[2] // k.shape[2]  # grouped-query attention: kv heads shared
        k, v = k.repeat_interleave(groups, dim=2), v.repeat_interleave(groups, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                             v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.w1 = nn.Linear(sizes.dim, sizes.ffn, bias=False)
        self.w2 = nn.Linear(sizes.ffn, sizes.dim, bias=False)
        self.w3 = nn.Linear(sizes.dim, sizes.ffn, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.attention_norm = nn.RMSNorm(sizes.dim, eps=1e-5)
        self.attention = Attention(sizes)
        self.ffn_norm = nn.RMSNorm(sizes.dim, eps=1e-5)
        self.feed_forward = FeedForward(sizes)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.tok_embeddings = nn.Embedding(sizes.vocab, sizes.dim)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(sizes) for i in range(sizes.layers)})
        self.norm = nn.RMSNorm(sizes.dim, eps=1e-5)
        self.output = nn.Linear(sizes.dim, sizes.vocab, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens
        for layer in self.layers.values():
            h = layer(h)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h


def seed_of(name):
    return zlib.crc32(name.encode())


@torch.no_grad()
def init_weights(model, dtype):
    """Every parameter drawn from its own name; norms start at one."""
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.fill_(1.0)
            continue
        scale = 1.0 if "tok_embeddings" in name else p.shape[-1] ** -0.5
        p.copy_(ttrace.consistent_randn(p.shape, seed_of(name), scale=scale))
    model.to(dtype)
