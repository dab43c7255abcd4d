"""Hidden dropout on each block's attention output, which torchtitan's Llama-3 does not have.

The trainer adds it so that activation checkpointing has a random operator to recompute, as a
model with dropout (most fine-tuning recipes, GPT-2-class models) gives it: whether the
recomputation draws the forward's mask depends on checkpointing restoring the RNG state
(torchtitan's `activation_checkpoint.preserve_rng_state`).

To keep every layout comparable with the one-process reference, every run and every rank draws
the whole micro-batch's mask from torch's default generator, seeded alike before training, and
takes its own part: its data-parallel rank's samples (in the perturbed reference's sample
order), and under sequence parallelism its tensor-parallel rank's sequence chunk. Every rank
then draws as many numbers as the reference, so their generators stay in step."""

import torch
from torch.distributed.tensor import DTensor
from ttrace.wrappers import unwrapped

P = 0.1
SEED = 7  # the default generator's seed before the first iteration, in every run


class HiddenDropout(torch.nn.Module):
    """Dropout with probability P on a [samples, sequence, hidden] activation of which this
    rank holds samples `rows` (a slice of the micro-batch's `samples`, reordered by `order`)
    and, when its sequence is shorter than `seq`, chunk `tp_rank` of `tp`."""

    def __init__(self, samples, rows, order, seq, tp, tp_rank):
        super().__init__()
        self.samples, self.rows, self.order = samples, rows, order
        self.seq, self.tp, self.tp_rank = seq, tp, tp_rank

    def forward(self, x):
        local = x.to_local() if isinstance(x, DTensor) else x
        keep = torch.rand(self.samples, self.seq, local.shape[-1]) >= P
        keep = keep[self.rows][self.order]
        if local.shape[1] < self.seq:  # sequence parallel: this rank's chunk
            keep = keep.chunk(self.tp, dim=1)[self.tp_rank]
        dropped = local * keep.to(local.dtype) / (1 - P)
        if isinstance(x, DTensor):
            return DTensor.from_local(dropped, x.device_mesh, x.placements, run_check=False,
                                      shape=x.shape, stride=x.stride())
        return dropped


def add_hidden_dropout(model, samples, dp, dp_rank, order, seq, tp, tp_rank):
    """Adds `attention_dropout` to each block of `model` (inside its checkpoint and compile
    wrappers) and applies it to the block's attention output with a forward hook, which a
    recomputation runs too. `samples`: sequences per micro-batch; `order`: this rank's sample
    order (None: as read)."""
    rows = slice(dp_rank * samples // dp, (dp_rank + 1) * samples // dp)
    order = list(range(samples // dp)) if order is None else list(order)
    for block in model.layers.children():
        inner = unwrapped(block)
        inner.attention_dropout = HiddenDropout(samples, rows, order, seq, tp, tp_rank)
        inner.attention.register_forward_hook(
            lambda module, args, out, drop=inner.attention_dropout: drop(out))
