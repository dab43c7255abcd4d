#!/usr/bin/env python3
"""A small Llama-style model trained with PyTorch's own parallel APIs only, on CPU processes
(gloo), captured by ttrace in a few lines: tensor and sequence parallelism
(parallelize_module: ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput,
loss_parallel), FSDP2 (fully_shard, alone and over tensor parallelism) and a 1F1B pipeline
over 2 stages (torch.distributed.pipelining). Every placement in its traces comes from the
DTensors themselves.

The same script runs the reference (--role reference) and the perturbed reference (--role
perturbed-reference), on one device unless --config lays them out too: every process builds
the same full model from seeded weights before parallelizing it, and every layout reads the
same tokens.

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
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

import ttrace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this trainer, and examples/ (corpus.py)
import corpus  # noqa: E402
from bugs import BUGS, CONFIGS, Config  # noqa: E402
from model import Llama, Sizes, init_weights, seed_of  # noqa: E402
from parallelize import (apply_fsdp, apply_tp, clip_grad_norm, load_as_plain_shards,  # noqa: E402
                         pipeline_stage)

MICRO_BATCHES, LR = 2, 0.1
# Gradient clipping bites: the total gradient norm of the first iterations is about 1.1, so
# clipping scales it by about 0.8, and a rank that clips with a smaller norm (its own
# shards, its own stage, gradients scaled down twice) does not clip at all.
MAX_NORM = 0.9
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def tokens(iteration, sizes, batch, dp, dp_rank, sample_order=None):
    """This data-parallel rank's sequences of an iteration and their next-token labels: its
    share of micro-batch 0, then of micro-batch 1 (a pipeline schedule splits them again);
    each micro-batch's in `sample_order` when given (a perturbed reference's)."""
    g = torch.Generator().manual_seed(1000 + iteration)
    data = torch.randint(sizes.vocab, (batch, sizes.seq + 1), generator=g)
    per_micro_batch = batch // MICRO_BATCHES
    rows = per_micro_batch // dp
    order = list(range(rows)) if sample_order is None else sample_order
    mine = torch.cat([data[m * per_micro_batch + dp_rank * rows:][:rows][order]
                      for m in range(MICRO_BATCHES)])
    return mine[:, :-1], mine[:, 1:]


def loss_of(logits, labels, tokens_total, tp_group=None, bug=None):
    """Cross-entropy summed over the tokens, over every token of the iteration (tokens_total).
    Vocabulary-sharded logits (a DTensor) need loss_parallel() around this and the backward."""
    if isinstance(logits, DTensor) and bug == "loss_on_local_vocab":
        return local_vocab_cross_entropy(logits, labels, tp_group) / tokens_total
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1),
                           reduction="sum") / tokens_total


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
    sizes, tokens_total = args.sizes, args.batch * args.sizes.seq
    torch.manual_seed(0)
    model = Llama(sizes)
    init_weights(model, dtype)
    perturbation = None
    if args.role == "perturbed-reference":
        perturbation = {"relative": ttrace.unit_roundoff(dtype), "seed": args.seed}
        for name, p in model.named_parameters():
            ttrace.perturb_(p.data, seed=args.seed + seed_of(name))
    sample_order = corpus.sample_order(args, args.batch // MICRO_BATCHES)
    full = {name: p.detach().clone() for name, p in model.named_parameters()}
    if config.pp > 1:
        model = pipeline_stage(model, coords["pp"], config.pp)
    if config.tp > 1:
        apply_tp(model, mesh["tp"], config.sp, args.bug)
    if config.dp > 1:
        apply_fsdp(model, mesh["dp"], dtype, args.bug)
    if args.bug == "strided_shard_loaded_as_shard":
        load_as_plain_shards(model, full)
    device = torch.device(args.device)
    model.to(device)  # one device only (main refuses a layout off the CPU)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    cap = None if args.no_capture else ttrace.Capture(
        model, args.out, role=args.role, mesh=mesh, optimizer=optimizer,
        iterations=range(args.iterations), dtype_recipe=args.dtype, perturbation=perturbation,
        max_queued_bytes=args.max_queued_mb << 20,
        sample_order=sample_order,
        model_info={"name": "torch-native-llama", "num_layers": sizes.layers,
                    "hidden_size": sizes.dim, "heads": sizes.heads, "kv_heads": sizes.kv_heads,
                    "ffn_hidden_size": sizes.ffn, "vocab": sizes.vocab, "seq": sizes.seq,
                    "batch": args.batch, "bug": args.bug or "none"})
    tp_group = mesh["tp"].get_group() if config.tp > 1 else None
    pp_group = mesh["pp"].get_group() if config.pp > 1 else None
    schedule = None
    if config.pp > 1:
        schedule = one_f_one_b(model, coords["pp"], config.pp, pp_group, tokens_total, args.bug)
    dp_rank = 0 if args.bug == "dp_same_batch" else coords.get("dp", 0)
    seconds = []
    for iteration in range(args.iterations):
        start = time.perf_counter()
        x, labels = (t.to(device) for t in tokens(iteration, sizes, args.batch, config.dp,
                                                  dp_rank, sample_order))
        if schedule is None:
            for xs, ys in zip(x.chunk(MICRO_BATCHES), labels.chunk(MICRO_BATCHES)):
                with loss_parallel() if config.tp > 1 else contextlib.nullcontext():
                    loss_of(model(xs), ys, tokens_total, tp_group, args.bug).backward()
        elif coords["pp"] == 0:
            schedule.step(x)
        else:
            schedule.step(target=labels)
        clip_grad_norm(list(model.parameters()), MAX_NORM, pp_group, args.bug)
        optimizer.step()
        optimizer.zero_grad()
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # the step's time, not the time to queue it
        seconds.append(time.perf_counter() - start)
    if cap is not None:
        cap.close()
    if args.timings:  # for bench/capture_cost.py
        with open(f"{args.timings}.rank{rank}.json", "w") as f:
            json.dump({"step_seconds": seconds, "capture": cap.stats if cap else None}, f)
    if config.world > 1:
        dist.destroy_process_group()


def one_f_one_b(stage_module, stage, stages, group, tokens_total, bug):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    pipe = PipelineStage(stage_module, stage, stages, torch.device("cpu"), group=group)
    # The loss is normalized by every token of the iteration: the schedule must not divide the
    # gradients by the number of micro-batches again.
    return Schedule1F1B(pipe, n_microbatches=MICRO_BATCHES,
                        loss_fn=lambda logits, labels: loss_of(logits, labels, tokens_total),
                        scale_grads=bug == "pp_loss_scaled_twice")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    corpus.run_arguments(ap, BUGS, DTYPES)
    ap.add_argument("--config", choices=sorted(CONFIGS),
                    help="the layout (bugs.CONFIGS): default fsdp2_tp2_sp for the distributed "
                         "run, one device for the references; a reference in a layout is a "
                         "distributed reference (docs/checker.md)")
    default = Sizes()
    for name, help_text in (("dim", "model dimension"), ("heads", "query heads"),
                            ("kv_heads", "key/value heads"), ("ffn", "feed-forward width"),
                            ("layers", "transformer layers"), ("vocab", "vocabulary"),
                            ("seq", "sequence length")):
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(default, name),
                        help=f"{help_text} (default {getattr(default, name)})")
    ap.add_argument("--batch", type=int, default=8,
                    help="sequences per iteration, in 2 micro-batches (default 8)")
    ap.add_argument("--no-capture", action="store_true",
                    help="train without ttrace (the baseline of bench/capture_cost.py)")
    ap.add_argument("--max-queued-mb", type=int, default=1024,
                    help="bound on the capture's queued tensors in MiB (default 1024)")
    ap.add_argument("--device", default="cpu",
                    help="where a one-device run trains, e.g. cuda (default cpu; layouts run "
                         "on CPU processes over gloo)")
    ap.add_argument("--timings", metavar="PREFIX",
                    help="write each rank's step times and capture stats to PREFIX.rankN.json")
    args = ap.parse_args(argv)
    if args.list_bugs:
        json.dump(corpus.table(BUGS, CONFIGS), sys.stdout, indent=2)
        print()
        return
    if not args.out and not args.no_capture:
        ap.error("--out is required")
    args.sizes = Sizes(args.dim, args.heads, args.kv_heads, args.ffn, args.layers, args.vocab,
                       args.seq)
    if args.role != "distributed":
        args.bug = None  # the references are bug-free
    default = "fsdp2_tp2_sp" if args.role == "distributed" else None
    args.layout = CONFIGS[args.config or default] if args.config or default else Config()
    c, z = args.layout, args.sizes
    if (args.batch % (MICRO_BATCHES * c.dp) or z.dim % z.heads or z.heads % z.kv_heads
            or z.kv_heads % c.tp or z.ffn % c.tp or z.layers % c.pp or z.head_dim % 2
            or (c.sp and z.seq % c.tp)):
        ap.error(f"the layout (tp {c.tp}, dp {c.dp}, pp {c.pp}) does not divide the model "
                 f"({z}, batch {args.batch} in {MICRO_BATCHES} micro-batches)")
    if args.device != "cpu" and args.layout.world > 1:
        ap.error(f"--device {args.device}: only a one-device run trains off the CPU")
    if args.layout.world == 1:
        train(0, args, None)
        return
    corpus.start_ranks(train, args, args.layout.world)


if __name__ == "__main__":
    main()
