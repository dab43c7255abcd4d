"""A small Llama-style model written as torchtitan writes its models, so that torch's own
parallel APIs apply to it unchanged: RMSNorm, rotary positions, grouped-query attention and a
SwiGLU feed-forward, layers in a ModuleDict keyed by their global number (a pipeline stage
deletes the others and keeps global names), and modules that may be None on a stage.

Weights are drawn per parameter from its global name (ttrace.consistent_randn), so every
process builds the same full model before parallelizing it, whatever its layout."""

import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

import ttrace

DIM, HEADS, KV_HEADS, FFN, LAYERS = 32, 4, 2, 64, 2
VOCAB, SEQ = 62, 16  # 62: FSDP2 shards the vocabulary rows unevenly (16 and 15)
HEAD_DIM = DIM // HEADS


def rotary(x, cos, sin):
    """Rotary position embedding of x (batch, seq, heads, head_dim): pairs of halves rotated by
    each position's angles."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(DIM, HEADS * HEAD_DIM, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wo = nn.Linear(HEADS * HEAD_DIM, DIM, bias=False)
        angles = torch.outer(torch.arange(SEQ, dtype=torch.float32),
                             10000.0 ** (-torch.arange(0, HEAD_DIM, 2) / HEAD_DIM))
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        batch, seq = x.shape[0], x.shape[1]
        # -1: the heads this rank holds (all of them, or its tensor-parallel share)
        q = self.wq(x).view(batch, seq, -1, HEAD_DIM)
        k = self.wk(x).view(batch, seq, -1, HEAD_DIM)
        v = self.wv(x).view(batch, seq, -1, HEAD_DIM)
        cos, sin = self.cos[:seq].to(q.dtype), self.sin[:seq].to(q.dtype)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        groups = q.shape[2] // k.shape[2]  # grouped-query attention: kv heads shared
        k, v = k.repeat_interleave(groups, dim=2), v.repeat_interleave(groups, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                             v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, FFN, bias=False)
        self.w2 = nn.Linear(FFN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, FFN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = nn.RMSNorm(DIM, eps=1e-5)
        self.attention = Attention()
        self.ffn_norm = nn.RMSNorm(DIM, eps=1e-5)
        self.feed_forward = FeedForward()

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleDict({str(i): TransformerBlock() for i in range(LAYERS)})
        self.norm = nn.RMSNorm(DIM, eps=1e-5)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

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
