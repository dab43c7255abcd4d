#!/usr/bin/env python3
"""A tiny GPT-style MLP stack trained with Megatron-style tensor parallelism and data
parallelism on CPU processes (gloo), instrumented with the ttrace capture.

Each layer: x + fc2(gelu(fc1(layernorm(x)))) with fc1 column-parallel and fc2 row-parallel
over `tp`; a replicated linear head and a squared-error loss close the model. Batch rows are
split over `dp`. The same script runs the single-device reference (--role reference) and the
perturbed reference (--role perturbed-reference): weights and inputs are generated
consistently (a shard only depends on its global coordinates), so every shard of the
distributed run equals the matching slice of the reference.

--bug NAME injects a silent bug modelled on a real Megatron-LM one (see BUGS and
docs/capture.md). Example:

    train.py --role distributed --tp 2 --dp 2 --out /tmp/t/dist --bug row_bias_every_rank
"""

import argparse
import os
import tempfile
import zlib

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

import ttrace

HIDDEN, FFN, OUT, LAYERS = 16, 32, 8, 2
BATCH = 8  # global rows per micro-batch
MICRO_BATCHES, LR = 2, 0.1
BUGS = {
    "row_bias_every_rank": "row-parallel fc2 adds its bias on every TP rank before the all-reduce",
    "missing_dp_grad_allreduce_scale": "DP gradient all-reduce divides by dp although the loss "
    "is already normalized by the global batch (wrong scale)",
    "tp_input_grad_no_allreduce": "column-parallel fc1 does not all-reduce its input gradient",
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class Parallel:
    """This process's place in the (dp, tp) mesh and its process groups."""

    def __init__(self, tp=1, dp=1, rank=0, bug=None):
        self.tp, self.dp, self.bug = tp, dp, bug
        self.dp_rank, self.tp_rank = divmod(rank, tp)  # row-major mesh (dp, tp)
        self.tp_group = self.dp_group = None
        if tp * dp > 1:
            # every rank creates every group, in the same order
            for d in range(dp):
                g = dist.new_group([d * tp + t for t in range(tp)])
                if d == self.dp_rank:
                    self.tp_group = g
            for t in range(tp):
                g = dist.new_group([d * tp + t for d in range(dp)])
                if t == self.tp_rank:
                    self.dp_group = g


def all_reduce(t, group):
    """Sum over `group`; gloo cannot reduce bf16, so the sum runs in fp32."""
    if group is None:
        return t
    buf = t.detach().to(torch.float32, copy=True)
    dist.all_reduce(buf, group=group)
    return buf.to(t.dtype)


class CopyToTP(torch.autograd.Function):
    """Identity forward; all-reduce of the input gradient over TP backward (Megatron's f)."""

    @staticmethod
    def forward(ctx, x, par):
        ctx.par = par
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        if ctx.par.bug == "tp_input_grad_no_allreduce":
            return grad, None
        return all_reduce(grad, ctx.par.tp_group), None


class ReduceFromTP(torch.autograd.Function):
    """All-reduce over TP forward; identity backward (Megatron's g)."""

    @staticmethod
    def forward(ctx, x, par):
        return all_reduce(x, par.tp_group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def tp_param(*local_shape, partition_dim=None):
    """A parameter, marked with Megatron's attributes when it is split over TP."""
    p = nn.Parameter(torch.empty(*local_shape))
    if partition_dim is not None:
        p.tensor_model_parallel, p.partition_dim, p.partition_stride = True, partition_dim, 1
    return p


class ColumnParallelLinear(nn.Module):
    def __init__(self, fan_in, fan_out, par):
        super().__init__()
        self.par = par
        self.weight = tp_param(fan_out // par.tp, fan_in, partition_dim=0)
        self.bias = tp_param(fan_out // par.tp, partition_dim=0)

    def forward(self, x):
        return F.linear(CopyToTP.apply(x, self.par), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, fan_in, fan_out, par):
        super().__init__()
        self.par = par
        self.weight = tp_param(fan_out, fan_in // par.tp, partition_dim=1)
        self.bias = tp_param(fan_out)

    def forward(self, x):
        if self.par.bug == "row_bias_every_rank":
            return ReduceFromTP.apply(F.linear(x, self.weight, self.bias), self.par)
        return ReduceFromTP.apply(F.linear(x, self.weight), self.par) + self.bias


class Block(nn.Module):
    def __init__(self, par):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.fc1 = ColumnParallelLinear(HIDDEN, FFN, par)
        self.act = nn.GELU()
        self.fc2 = RowParallelLinear(FFN, HIDDEN, par)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


class Model(nn.Module):
    def __init__(self, par):
        super().__init__()
        self.layers = nn.ModuleList(Block(par) for _ in range(LAYERS))
        self.head = nn.Linear(HIDDEN, OUT)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def seed_of(name):
    return zlib.crc32(name.encode())


@torch.no_grad()
def init_weights(model, par, dtype):
    """Consistent generation: each shard is the slice of the global tensor drawn from the
    parameter's global name, so the reference and every layout see the same weights."""
    for name, p in model.named_parameters():
        shape, index = list(p.shape), [slice(None)] * p.dim()
        if getattr(p, "tensor_model_parallel", False):
            d, n = p.partition_dim, p.shape[p.partition_dim]
            shape[d] *= par.tp
            index[d] = slice(par.tp_rank * n, (par.tp_rank + 1) * n)
        fan_in = shape[-1] if len(shape) > 1 else 1
        scale = 0.5 if name.endswith("bias") else fan_in**-0.5
        values = ttrace.consistent_randn(shape, seed_of(name), tuple(index), scale=scale)
        if name.endswith("norm.weight"):
            values = 1 + 0.2 * values
        p.data = values.to(dtype)


def batch(iteration, micro_batch, par, dtype):
    """Rows of micro-batch `micro_batch` that belong to this DP rank."""
    rows = BATCH // par.dp
    index = (slice(par.dp_rank * rows, (par.dp_rank + 1) * rows), slice(None))
    seed = 1000 + 10 * iteration + micro_batch
    x = ttrace.consistent_randn((BATCH, HIDDEN), seed, index, dtype)
    y = ttrace.consistent_randn((BATCH, OUT), seed + 500, index, dtype)
    return x, y


TP_SHARDED = {("fc1", "forward_output"), ("fc1", "output_grad"), ("fc2", "forward_input"),
              ("fc2", "input_grad"), ("act", "forward_input"), ("act", "forward_output"),
              ("act", "output_grad"), ("act", "input_grad")}


def placements(name, kind, index, tensor):
    """Activations: batch rows over dp; the FFN dimension over tp between fc1 and fc2.
    Parameters: None, so the capture reads Megatron's partition attributes."""
    if kind in ("param", "param_grad", "updated_param"):
        return None
    tp = "Shard(-1)" if (name.rsplit(".", 1)[-1], kind) in TP_SHARDED else "Replicate"
    return {"dp": "Shard(0)", "tp": tp}


def train(rank, args, rdzv):
    torch.set_num_threads(1)
    world = args.tp * args.dp
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{rdzv}", rank=rank, world_size=world)
    par = Parallel(args.tp, args.dp, rank, args.bug)
    dtype = DTYPES[args.dtype]
    torch.manual_seed(0)
    model = Model(par)
    init_weights(model, par, dtype)
    perturbation = None
    if args.role == "perturbed-reference":
        perturbation = {"relative": ttrace.unit_roundoff(dtype), "seed": args.seed}
        for name, p in model.named_parameters():
            ttrace.perturb_(p.data, seed=args.seed + seed_of(name))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    cap = ttrace.Capture(
        model, args.out, role=args.role, rank=rank, world_size=world,
        mesh={"dp": args.dp, "tp": args.tp} if world > 1 else {},
        dtype_recipe=args.dtype, iterations=range(args.iterations), micro_batches=MICRO_BATCHES,
        placements=placements, perturbation=perturbation,
        model_info={"name": "tp_mlp", "num_layers": LAYERS, "hidden_size": HIDDEN,
                    "ffn_hidden_size": FFN, "bug": args.bug or "none"})
    for it in range(args.iterations):
        with cap.step(it):
            cap.record_params()
            optimizer.zero_grad()
            for m in range(MICRO_BATCHES):
                with cap.micro_batch(m):
                    x, y = batch(it, m, par, dtype)
                    if perturbation:
                        k = 7919 * (it * MICRO_BATCHES + m)
                        ttrace.perturb_(x, seed=args.seed + k + 1)
                        ttrace.perturb_(y, seed=args.seed + k + 2)
                    # sum over this rank's rows / the global count: DP shards add up exactly
                    loss = ((model(x) - y).float() ** 2).sum() / (BATCH * OUT * MICRO_BATCHES)
                    loss.backward()
            for p in model.parameters():
                p.grad = all_reduce(p.grad, par.dp_group)
                if par.bug == "missing_dp_grad_allreduce_scale":
                    p.grad /= par.dp
            cap.record_param_grads()
            optimizer.step()
            cap.record_updated_params()
    cap.close()
    if world > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--role", default="distributed",
                    choices=["distributed", "reference", "perturbed-reference"])
    ap.add_argument("--out", required=True, help="trace folder to write")
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--bug", choices=sorted(BUGS), metavar="NAME",
                    help="inject a silent bug:\n" + "\n".join(f"  {k}: {v}" for k, v in BUGS.items()))
    ap.add_argument("--iterations", type=int, default=2, help="iterations to train and capture")
    ap.add_argument("--seed", type=int, default=1, help="seed of the perturbation")
    args = ap.parse_args()
    if args.role != "distributed":
        args.tp = args.dp = 1
        args.bug = None  # the references are the bug-free single-device model
    world = args.tp * args.dp
    if world == 1:
        train(0, args, None)
        return
    with tempfile.TemporaryDirectory() as tmp:
        # fork: the children inherit the imported torch instead of importing it again, and
        # torch._dynamo, which the optimizer imports on first use (seconds in every rank)
        import torch._dynamo  # noqa: F401
        mp.start_processes(train, args=(args, os.path.join(tmp, "rdzv")), nprocs=world,
                           start_method="fork")


if __name__ == "__main__":
    main()
