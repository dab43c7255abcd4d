"""The mixture-of-experts MLP with expert parallelism over the data-parallel ranks.

Tokens choose their expert by hashing their id (Hash Layers, Roller et al. 2021): the choice
is exact in every layout, so round-off can never send a token to another expert than in the
reference. A learned router still weighs each expert's output by the softmax probability of
the chosen expert. Expert parallelism (ep = dp) gives each DP rank `Sizes.experts / dp` experts;
tokens travel to their expert's rank and back with all-to-all."""

import torch
import torch.nn as nn

from parallel import all_to_all



class AllToAll(torch.autograd.Function):
    """Rows `send_counts[r]` of the input go to rank r; the gradient travels back."""

    @staticmethod
    def forward(ctx, x, group, send_counts, recv_counts):
        ctx.group, ctx.send_counts, ctx.recv_counts = group, send_counts, recv_counts
        return all_to_all(x, group, send_counts, recv_counts)

    @staticmethod
    def backward(ctx, grad):
        return all_to_all(grad, ctx.group, ctx.recv_counts, ctx.send_counts), None, None, None


class Expert(nn.Module):
    def __init__(self, hidden, ffn, par):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(ffn, hidden)
        for p in self.parameters():
            # on its expert-parallel rank only; under SP each TP rank sees other tokens
            p.expert, p.sequence_parallel = True, par.sp

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class MoE(nn.Module):
    """[batch, sequence, hidden] -> the same, each token through its expert, weighted by the
    router's probability of that expert. `par.token_ids` holds the ids of the tokens of x."""

    def __init__(self, hidden, ffn, par):
        super().__init__()
        self.par = par
        self.experts_total = par.sizes.experts
        self.router = nn.Linear(hidden, self.experts_total, bias=False)
        self.router.weight.sequence_parallel = par.sp
        self.local = self.experts_total // par.ep
        self.experts = nn.ModuleList(Expert(hidden, ffn, par) for _ in range(self.local))

    def forward(self, x):
        par = self.par
        b, s, h = x.shape
        ids = par.token_ids
        if par.sp:
            ids = ids[:, par.tp_rank * s:(par.tp_rank + 1) * s]
        expert = ids.reshape(-1) % self.experts_total
        probs = self.router(x).float().softmax(dim=-1).reshape(-1, self.experts_total)
        gate = probs.gather(1, expert.unsqueeze(1)).to(x.dtype)

        # dispatch: sorted by expert, hence by the rank that owns it
        order = expert.argsort(stable=True)
        send_counts = torch.bincount(expert // self.local, minlength=par.ep)
        recv_counts = all_to_all(send_counts, par.ep_group, [1] * par.ep, [1] * par.ep)
        send_counts, recv_counts = send_counts.tolist(), recv_counts.tolist()
        routed = AllToAll.apply(x.reshape(-1, h)[order], par.ep_group, send_counts, recv_counts)
        their_expert = all_to_all(expert[order], par.ep_group, send_counts, recv_counts)

        first = par.ep_rank * self.local
        if par.bug == "moe_expert_offset":
            first = par.ep_rank  # the rank's offset taken for its first expert id
        local = (their_expert - first) % self.local
        by_expert = local.argsort(stable=True)
        sorted_tokens = routed[by_expert]
        counts = torch.bincount(local, minlength=self.local).tolist()
        outputs = [e(chunk) for e, chunk in zip(self.experts, sorted_tokens.split(counts))]
        processed = torch.cat(outputs)[by_expert.argsort()]

        back = AllToAll.apply(processed, par.ep_group, recv_counts, send_counts)
        return (back[order.argsort()] * gate).reshape(b, s, h)
