#!/usr/bin/env python3
"""A small Llama-style model trained with PyTorch's own parallel APIs only, on CPU processes
(gloo), captured by ttrace in three lines: tensor and sequence parallelism
(parallelize_module: ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput,
loss_parallel), FSDP2 (fully_shard, alone and over tensor parallelism) and a 1F1B pipeline
over 2 stages (torch.distributed.pipelining). Every placement in its traces comes from the
DTensors themselves.

The same script runs the single-device reference (--role reference) and the perturbed
reference (--role perturbed-reference): every process builds the same full model from
seeded weights before parallelizing it, and every layout reads the same tokens.

--bug NAME injects a silent bug of bugs.py, modelled on a real mistake in DTensor code.

    train.py --config fsdp2_tp2_sp --out /tmp/t/dist --bug sp_norm_not_in_plan
    train.py --role reference --out /tmp/t/ref
    train.py --role perturbed-reference --out /tmp/t/pert
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

import ttrace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this trainer, and examples/ (corpus.py)
import corpus  # noqa: E402
from bugs import BUGS, CONFIGS, Config  # noqa: E402
from model import DIM, FFN, HEADS, KV_HEADS, LAYERS, SEQ, VOCAB, Llama, init_weights, seed_of  # noqa: E402
from parallelize import (apply_fsdp, apply_tp, clip_grad_norm, load_as_plain_shards,  # noqa: E402
                         pipeline_stage)

BATCH, MICRO_BATCHES, LR = 8, 2, 0.1
# Gradient clipping bites: the total gradient norm of the first iterations is about 1.1, so
# clipping scales it by about 0.8, and a rank that clips with a smaller norm (its own
# shards, its own stage, gradients scaled down twice) does not clip at all.
MAX_NORM = 0.9
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOKENS = BATCH * SEQ  # the loss is the mean over every token of the iteration


def tokens(iteration, dp, dp_rank):
    """This data-parallel rank's sequences of an iteration and their next-token labels: its
    share of micro-batch 0, then of micro-batch 1 (a pipeline schedule splits them again)."""
    g = torch.Generator().manual_seed(1000 + iteration)
    data = torch.randint(VOCAB, (BATCH, SEQ + 1), generator=g)
    per_micro_batch = BATCH // MICRO_BATCHES
    rows = per_micro_batch // dp
    mine = torch.cat([data[m * per_micro_batch + dp_rank * rows:][:rows]
                      for m in range(MICRO_BATCHES)])
    return mine[:, :-1], mine[:, 1:]


def loss_of(logits, labels, tp_group=None, bug=None):
    """Cross-entropy summed over the tokens, over every token of the iteration. Vocabulary-
    sharded logits (a DTensor) need loss_parallel() around this and the backward."""
    if isinstance(logits, DTensor) and bug == "loss_on_local_vocab":
        return local_vocab_cross_entropy(logits, labels, tp_group) / TOKENS
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1),
                           reduction="sum") / TOKENS


def local_vocab_cross_entropy(logits, labels, tp_group):
    """Bug loss_on_local_vocab: a hand-written vocabulary-parallel cross-entropy on each
    rank's shard of the logits that picks the label's logit from the rank holding it but
    takes the log-sum-exp over its own shard only (the all-reduce of the exponential sums
    is missing)."""
    from torch.distributed.nn.functional import all_reduce

    local = logits.to_local().float()
    width = local.shape[-1]
    start = dist.get_rank(tp_group) * width
    held = (labels >= start) & (labels < start + width)
    picked = local.gather(-1, (labels - start).clamp(0, width - 1).unsqueeze(-1)).squeeze(-1)
    picked = all_reduce(picked * held, group=tp_group)
    return (local.logsumexp(-1) - picked).sum()


def train(rank, args, rdzv):
    torch.set_num_threads(1)
    config = args.layout
    dtype = DTYPES[args.dtype]
    mesh = None
    if config.world > 1:
        dist.init_process_group("gloo", init_method=f"file://{rdzv}", rank=rank,
                                world_size=config.world)
        axes = config.mesh()
        mesh = init_device_mesh("cpu", tuple(axes.values()), mesh_dim_names=tuple(axes))
    coords = dict(zip(mesh.mesh_dim_names, mesh.get_coordinate())) if mesh else {}
    torch.manual_seed(0)
    model = Llama()
    init_weights(model, dtype)
    perturbation = None
    if args.role == "perturbed-reference":
        perturbation = {"relative": ttrace.unit_roundoff(dtype), "seed": args.seed}
        for name, p in model.named_parameters():
            ttrace.perturb_(p.data, seed=args.seed + seed_of(name))
    full = {name: p.detach().clone() for name, p in model.named_parameters()}
    if config.pp > 1:
        model = pipeline_stage(model, coords["pp"], config.pp)
    if config.tp > 1:
        apply_tp(model, mesh["tp"], config.sp, args.bug)
    if config.dp > 1:
        apply_fsdp(model, mesh["dp"], dtype, args.bug)
    if args.bug == "strided_shard_loaded_as_shard":
        load_as_plain_shards(model, full)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    cap = ttrace.Capture(
        model, args.out, role=args.role, mesh=mesh, optimizer=optimizer,
        iterations=range(args.iterations), dtype_recipe=args.dtype, perturbation=perturbation,
        parallel={"sp": config.sp},
        model_info={"name": "torch-native-llama", "num_layers": LAYERS, "hidden_size": DIM,
                    "heads": HEADS, "kv_heads": KV_HEADS, "ffn_hidden_size": FFN,
                    "vocab": VOCAB, "seq": SEQ, "bug": args.bug or "none"})
    tp_group = mesh["tp"].get_group() if config.tp > 1 else None
    pp_group = mesh["pp"].get_group() if config.pp > 1 else None
    schedule = None
    if config.pp > 1:
        schedule = one_f_one_b(model, coords["pp"], config.pp, pp_group, args.bug)
    dp_rank = 0 if args.bug == "dp_same_batch" else coords.get("dp", 0)
    for iteration in range(args.iterations):
        x, labels = tokens(iteration, config.dp, dp_rank)
        if schedule is None:
            for xs, ys in zip(x.chunk(MICRO_BATCHES), labels.chunk(MICRO_BATCHES)):
                with loss_parallel() if config.tp > 1 else contextlib.nullcontext():
                    loss_of(model(xs), ys, tp_group, args.bug).backward()
        elif coords["pp"] == 0:
            schedule.step(x)
        else:
            schedule.step(target=labels)
        clip_grad_norm(list(model.parameters()), MAX_NORM, pp_group, args.bug)
        optimizer.step()
        optimizer.zero_grad()
    cap.close()
    if config.world > 1:
        dist.destroy_process_group()


def one_f_one_b(stage_module, stage, stages, group, bug):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    pipe = PipelineStage(stage_module, stage, stages, torch.device("cpu"), group=group)
    # The loss is normalized by every token of the iteration: the schedule must not divide the
    # gradients by the number of micro-batches again.
    return Schedule1F1B(pipe, n_microbatches=MICRO_BATCHES, loss_fn=loss_of,
                        scale_grads=bug == "pp_loss_scaled_twice")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--role", default="distributed",
                    choices=["distributed", "reference", "perturbed-reference"])
    ap.add_argument("--out", help="trace folder to write")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="fsdp2_tp2_sp",
                    help="the layout (bugs.CONFIGS); the references ignore it")
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    ap.add_argument("--bug", choices=sorted(BUGS), metavar="NAME",
                    help="inject a silent bug:\n" + "\n".join(
                        f"  {b.name}: {b.description}" for b in BUGS.values()))
    ap.add_argument("--iterations", type=int, default=2, help="iterations to train and capture")
    ap.add_argument("--seed", type=int, default=1, help="seed of the perturbation")
    ap.add_argument("--list-bugs", action="store_true", help="print the bug corpus as JSON")
    args = ap.parse_args(argv)
    if args.list_bugs:
        json.dump(corpus.table(BUGS, CONFIGS), sys.stdout, indent=2)
        print()
        return
    if not args.out:
        ap.error("--out is required")
    args.layout = CONFIGS[args.config]
    if args.role != "distributed":
        args.layout, args.bug = Config(), None  # the bug-free single-device model
    if args.layout.world == 1:
        train(0, args, None)
        return
    with tempfile.TemporaryDirectory() as tmp:
        # fork: the children inherit the imported torch instead of importing it again
        mp.start_processes(train, args=(args, os.path.join(tmp, "rdzv")),
                           nprocs=args.layout.world, start_method="fork")


if __name__ == "__main__":
    main()
