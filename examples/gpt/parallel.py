"""This process's place in the (pp, dp, tp) device mesh, its process groups, and the
collectives of Megatron-style tensor, sequence, pipeline and data parallelism over gloo.

Debian's torch 1.13 gloo cannot reduce bf16 and has no reduce-scatter: every reduction runs
in fp32 and is cast back (as some frameworks do), and reduce-scatter is an all-reduce followed
by taking this rank's chunk."""

import torch
import torch.distributed as dist


class Parallel:
    """Sizes, coordinates and groups of one rank. The mesh is row-major over (pp, dp, tp):
    tp varies fastest, as in Megatron-LM."""

    def __init__(self, tp=1, dp=1, pp=1, sp=False, rank=0, bug=None):
        self.tp, self.dp, self.pp, self.sp, self.rank, self.bug = tp, dp, pp, sp and tp > 1, rank, bug
        self.pp_rank, rest = divmod(rank, dp * tp)
        self.dp_rank, self.tp_rank = divmod(rest, tp)
        self.tp_group = self.dp_group = self.embedding_group = None
        self.rng_key = (0, 0)  # (iteration, micro-batch) of the dropout masks
        if tp * dp * pp == 1:
            return
        # every rank creates every group, in the same order
        for p in range(pp):
            for d in range(dp):
                g = dist.new_group([self.rank_of(p, d, t) for t in range(tp)])
                if (p, d) == (self.pp_rank, self.dp_rank):
                    self.tp_group = g
        for p in range(pp):
            for t in range(tp):
                g = dist.new_group([self.rank_of(p, d, t) for d in range(dp)])
                if (p, t) == (self.pp_rank, self.tp_rank):
                    self.dp_group = g
        if pp > 1:
            for d in range(dp):
                for t in range(tp):
                    g = dist.new_group([self.rank_of(0, d, t), self.rank_of(pp - 1, d, t)])
                    if (d, t) == (self.dp_rank, self.tp_rank):
                        self.embedding_group = g

    def rank_of(self, p, d, t):
        return (p * self.dp + d) * self.tp + t

    @property
    def first_stage(self):
        return self.pp_rank == 0

    @property
    def last_stage(self):
        return self.pp_rank == self.pp - 1

    def coords(self, rank):
        p, rest = divmod(rank, self.dp * self.tp)
        return [p, *divmod(rest, self.tp)]


def all_reduce(t, group, op=None):
    """Sum (or `op`) over `group`, computed in fp32; the identity without a group."""
    if group is None:
        return t
    buf = t.detach().to(torch.float32, copy=True)
    dist.all_reduce(buf, op=op or dist.ReduceOp.SUM, group=group)
    return buf.to(t.dtype)


def all_gather(t, group, size, dim, reverse=False):
    """Concatenation along `dim` of every rank's `t`, in rank order (reversed: the bug of
    sp_allgather_wrong_order)."""
    if group is None:
        return t
    buf = t.detach().to(torch.float32).contiguous()
    parts = [torch.empty_like(buf) for _ in range(size)]
    dist.all_gather(parts, buf, group=group)
    if reverse:
        parts.reverse()
    return torch.cat(parts, dim).to(t.dtype)


def reduce_scatter(t, group, size, index, dim):
    """This rank's chunk along `dim` of the sum over `group`."""
    if group is None:
        return t
    return all_reduce(t, group).chunk(size, dim)[index].contiguous()


def send(t, dst):
    dist.send(t.detach().to(torch.float32).contiguous(), dst)


def recv(shape, dtype, src):
    buf = torch.empty(shape, dtype=torch.float32)
    dist.recv(buf, src)
    return buf.to(dtype)
