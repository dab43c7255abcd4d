"""This process's place in the (pp, dp, cp, tp) device mesh, its process groups, and the
collectives of Megatron-style tensor, sequence, context, pipeline and data parallelism over
gloo.

Debian's torch 1.13 gloo cannot reduce bf16 and has no reduce-scatter: every reduction runs
in fp32 and is cast back (as some frameworks do), and reduce-scatter is an all-reduce followed
by taking this rank's chunk."""

import itertools

import torch
import torch.distributed as dist

import ttrace

SEQ_DIM = 1  # activations are [batch, sequence, hidden]


class Parallel:
    """Sizes, coordinates and groups of one rank. The mesh is row-major over (pp, dp, cp, tp):
    tp varies fastest, as in Megatron-LM. `seq_len` is the global sequence length: context
    parallelism gives each rank zig-zag chunks of it (`positions`)."""

    def __init__(self, tp=1, dp=1, pp=1, cp=1, sp=False, rank=0, bug=None, seq_len=1):
        self.tp, self.dp, self.pp, self.cp, self.rank, self.bug = tp, dp, pp, cp, rank, bug
        self.sp, self.seq_len = sp and tp > 1, seq_len
        self.pp_rank, self.dp_rank, self.cp_rank, self.tp_rank = self.coords(rank)
        self.positions = ttrace.zigzag_ranges(seq_len, self.cp_rank, cp)  # [(start, stop)]
        self.tp_group = self.dp_group = self.cp_group = self.embedding_group = None
        self.ep, self.ep_rank, self.ep_group = dp, self.dp_rank, None  # EP = DP
        self.token_ids = None  # ids of the current micro-batch's tokens (hash routing)
        self.sizes = None  # the model's (model.Sizes), set by train.py
        self.fp8 = False  # the fp8 recipes: TP linears quantize through E4M3
        # the order a perturbed reference processes a micro-batch's sequences in (set by
        # train.py --sample-order reversed); None: the reference's
        self.sample_order = None
        self.fp8_rowwise = False  # ... with one scale per row rather than per tensor
        # ... or a block recipe (fp8.BlockFormat): MXFP8's power-of-two scale per 32 elements of
        # a row, NVFP4's e4m3 scale per 16 and an fp32 scale per tensor
        self.block_format = None
        self.amax_group = None  # the ranks of this pipeline stage: fp8 amax reduction
        self.rng_key = (0, 0)  # (iteration, micro-batch) of the dropout masks
        self.ac = False  # every layer's activations recomputed in the backward (model.recomputed)
        if self.world == 1:
            return
        # every rank creates every group, in the same order: one per line of the mesh along
        # the group's axis
        axes = {"pp": pp, "dp": dp, "cp": cp, "tp": tp}
        mine = dict(zip(axes, self.coords(rank)))
        for axis in ("tp", "dp", "cp"):
            others = [a for a in axes if a != axis]
            for fixed in itertools.product(*(range(axes[a]) for a in others)):
                where = dict(zip(others, fixed))
                g = dist.new_group([self.rank_of(**where, **{axis: i}) for i in range(axes[axis])])
                if all(mine[a] == where[a] for a in others):
                    setattr(self, axis + "_group", g)
        stage = dp * cp * tp
        for p in range(pp):
            g = dist.new_group(list(range(p * stage, (p + 1) * stage)))
            if p == self.pp_rank:
                self.amax_group = g
        if dp > 1:  # expert parallelism over the data-parallel ranks
            self.ep_group = self.dp_group
        if pp > 1:
            for d, c, t in itertools.product(range(dp), range(cp), range(tp)):
                g = dist.new_group([self.rank_of(0, d, c, t), self.rank_of(pp - 1, d, c, t)])
                if (d, c, t) == (self.dp_rank, self.cp_rank, self.tp_rank):
                    self.embedding_group = g

    @property
    def world(self):
        return self.tp * self.dp * self.pp * self.cp

    def rank_of(self, pp, dp, cp, tp):
        return ((pp * self.dp + dp) * self.cp + cp) * self.tp + tp

    def coords(self, rank):
        """(pp, dp, cp, tp) of `rank`."""
        rank, tp = divmod(rank, self.tp)
        rank, cp = divmod(rank, self.cp)
        pp, dp = divmod(rank, self.dp)
        return pp, dp, cp, tp

    @property
    def first_stage(self):
        return self.pp_rank == 0

    @property
    def last_stage(self):
        return self.pp_rank == self.pp - 1

    def position_index(self):
        """This rank's sequence positions as an index tensor."""
        return self.zigzag_index(self.cp_rank)

    def zigzag_index(self, cp_rank):
        """The sequence positions CP rank `cp_rank` holds, in its local order."""
        ranges = ttrace.zigzag_ranges(self.seq_len, cp_rank, self.cp)
        return torch.cat([torch.arange(a, b) for a, b in ranges])


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


def all_to_all(t, group, send_counts, recv_counts):
    """Rows: `send_counts[r]` of `t` to rank r, `recv_counts[r]` from it (floats travel in
    fp32); the identity without a group."""
    if group is None:
        return t
    wire = torch.float32 if t.is_floating_point() else t.dtype
    buf = t.detach().to(wire).contiguous()
    out = torch.empty((sum(recv_counts), *t.shape[1:]), dtype=wire)
    dist.all_to_all_single(out, buf, list(recv_counts), list(send_counts), group=group)
    return out.to(t.dtype)
