#!/usr/bin/env python3
"""A tiny GPT trained with Megatron-style tensor (TP), sequence (SP), context (CP, zig-zag
chunks), pipeline (PP), data (DP) and expert (EP, over the DP ranks) parallelism on CPU
processes (gloo), in fp32, bf16, fp8 (float8 GEMMs scaled per tensor, per row with
--dtype fp8_rowwise, or per block of 32 with power-of-two scales with --dtype mxfp8) or fp4
(--dtype nvfp4: e2m1 elements, an e4m3 scale per 16 and an fp32 scale per tensor),
instrumented with the ttrace capture.

The same script runs the reference (--role reference) and the perturbed reference (--role
perturbed-reference), on one device unless --config lays them out too. Weights, tokens and dropout masks are generated
consistently (a shard depends only on its global coordinates), so every shard of the
distributed run equals the matching slice of the reference, and tensor names are global
(pipeline stages renumber their layers).

--bug NAME injects a silent bug modelled on a real Megatron-LM one (bugs.py, docs/capture.md).

    train.py --role distributed --tp 2 --sp --out /tmp/t/dist --bug sp_norm_grad_no_allreduce
    train.py --role reference --out /tmp/t/ref
    train.py --role distributed --tp 2 --out /tmp/t/rewritten --rewrite-inputs /tmp/t/ref
"""

import argparse
import functools
import json
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this trainer, and examples/ (corpus.py)
import corpus  # noqa: E402
import ttrace  # noqa: E402
from bugs import BUGS, CONFIGS  # noqa: E402
from fp8 import MXFP8, NVFP4  # noqa: E402
from layers import FP8_INPUT, FP8_WEIGHT, Fp8Operands  # noqa: E402
from model import GPT, Sizes, init_weights, seed_of  # noqa: E402
from moe import MoE  # noqa: E402
from parallel import Parallel, all_reduce, recv, send  # noqa: E402

MICRO_BATCHES, LR = 2, 0.1
# the recipes: the dtype the model computes in; the fp8 ones run their TP GEMMs in fp8 (fp8.py)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp8": torch.bfloat16,
          "fp8_rowwise": torch.bfloat16, "mxfp8": torch.bfloat16, "nvfp4": torch.bfloat16}
PARAM_KINDS = ("param", "param_grad", "main_grad", "updated_param")
# TP placement of module tensors by the module's last name component: (input, output)
TP_PLACEMENT = {
    "qkv": ("seq", "Shard(2)"), "fc1": ("seq", "Shard(2)"), "head": ("seq", "Shard(2)"),
    "core": ("Shard(2)", "Shard(2)"), "act": ("Shard(2)", "Shard(2)"),
    "proj": ("Shard(2)", "seq"), "fc2": ("Shard(2)", "seq"),
    "loss": ("Shard(2)", "Replicate"),
}
# The TP linears' fp8 GEMM operands (layers.Fp8Operands) by the same key: (input, weight). The
# input is what the GEMM reads: a column-parallel layer's after the SP all-gather.
FP8_PLACEMENT = {
    "qkv": ("Replicate", "Shard(0)"), "fc1": ("Replicate", "Shard(0)"),
    "proj": ("Shard(2)", "Shard(1)"), "fc2": ("Shard(2)", "Shard(1)"),
}


def global_name(first_layer, par):
    """Local module / parameter name -> global: pipeline stages renumber their layers, expert
    parallel ranks their experts."""
    layers = ttrace.layer_offset(first_layer)
    experts = ttrace.layer_offset(par.ep_rank * (par.sizes.experts // par.ep), prefix="experts")
    return lambda name: experts(layers(name))


def hooked_modules(model):
    """The default modules, plus each mixture of experts as a whole; not the experts' insides,
    whose inputs are however many tokens chose them."""
    names = [n for n in ttrace.default_modules(model) if ".experts." not in n]
    return names + [n for n, m in model.named_modules() if isinstance(m, MoE)]


def placements_of(par):
    """Activations: sequences over dp, positions over cp (zig-zag chunks: the capture's
    zigzag_axes); the features (or vocabulary) split over tp inside the TP regions, outside
    them replicated over tp, or the sequence split under SP. Parameters: None, so the capture
    reads Megatron's partition attributes."""
    seq = "Shard(1)" if par.sp else "Replicate"

    def placements(name, kind, index, tensor):
        if kind in PARAM_KINDS:
            # an expert's parameters live on its expert-parallel (DP) rank only
            return {"dp": None} if ".experts." in name and par.ep > 1 else None
        last = name.rsplit(".", 1)[-1]
        if kind == "forward_input" and index in (FP8_INPUT, FP8_WEIGHT) and last in FP8_PLACEMENT:
            inp, weight = FP8_PLACEMENT[last]
            if index == FP8_WEIGHT:
                return {"tp": weight}  # replicated over dp and cp, as the parameter
            return {"dp": "Shard(0)", "cp": "Shard(1)", "tp": inp}
        inp, out = TP_PLACEMENT.get(last, ("seq", "seq"))
        tp = inp if kind in ("forward_input", "input_grad") else out
        return {"dp": "Shard(0)", "cp": "Shard(1)", "tp": seq if tp == "seq" else tp}

    return placements


def tokens(iteration, micro_batch, par):
    """This DP rank's sequences of a micro-batch and their next-token labels, at this CP
    rank's positions."""
    z = par.sizes
    g = torch.Generator().manual_seed(1000 + 10 * iteration + micro_batch)
    data = torch.randint(z.vocab, (z.batch, z.seq + 1), generator=g)
    rows = z.batch // par.dp
    data = data[par.dp_rank * rows:(par.dp_rank + 1) * rows]
    if par.sample_order is not None:  # a perturbed reference's other order (train.py --help)
        data = data[par.sample_order]
    positions = par.position_index()
    return data[:, positions], data[:, positions + 1]


def accumulate(model, par):
    """Adds this micro-batch's gradients to the fp32 main_grad (Megatron's gradient
    accumulation)."""
    for p in model.parameters():
        if p.grad is not None:
            p.main_grad += p.grad.float()
            if par.bug != "microbatch_grad_double_count":
                p.grad = None


def reduce_grads(model, par):
    """Sequence-parallel parameters over TP, every gradient over DP (except the experts', whose
    DP ranks hold other experts) and CP, the tied embedding over the first and last pipeline
    stage; then grad = main_grad in the parameter's dtype."""
    for name, p in model.named_parameters():
        g = p.main_grad
        if getattr(p, "sequence_parallel", False) and par.bug != "sp_norm_grad_no_allreduce":
            g = all_reduce(g, par.tp_group)
        if not getattr(p, "expert", False):
            g = all_reduce(g, par.dp_group)
        g = all_reduce(g, par.cp_group)
        if par.bug == "dp_grad_scale":
            g = g / par.dp
        if name == "embedding.weight" and par.bug != "tied_embedding_grad_unsynced":
            g = all_reduce(g, par.embedding_group)
        p.main_grad = g
        p.grad = g.to(p.dtype)


def loss_of(per_token, sizes):
    """This rank's share of the mean over all tokens of the iteration, so that DP gradients
    add up exactly."""
    return per_token.sum() / (sizes.batch * sizes.seq * MICRO_BATCHES)


def step_no_pipeline(model, par, cap, iteration):
    for m in range(MICRO_BATCHES):
        with cap.micro_batch(m):
            par.rng_key = (iteration, m)
            x, labels = tokens(iteration, m, par)
            par.token_ids = x
            loss_of(model(x, labels), par.sizes).backward()
            accumulate(model, par)


def step_pipeline(model, par, cap, iteration, dtype):
    """All forwards, then all backwards; activations and their gradients travel between
    neighbouring stages of the same (dp, tp) coordinate."""
    prev = par.rank_of(par.pp_rank - 1, par.dp_rank, par.cp_rank, par.tp_rank)
    nxt = par.rank_of(par.pp_rank + 1, par.dp_rank, par.cp_rank, par.tp_rank)
    z = par.sizes
    shape = (z.batch // par.dp, z.seq // par.cp // (par.tp if par.sp else 1), z.hidden)
    inputs, outputs = [], []
    for m in range(MICRO_BATCHES):
        with cap.micro_batch(m):
            par.rng_key = (iteration, m)
            x, labels = tokens(iteration, m, par)
            par.token_ids = x
            if not par.first_stage:
                x = recv(shape, dtype, prev).requires_grad_()
            out = model(x, labels)
            if not par.last_stage:
                stale = par.bug == "pp_stale_activation" and m > 0
                send(outputs[m - 1] if stale else out, nxt)
            inputs.append(x)
            outputs.append(out)
    for m in range(MICRO_BATCHES):
        with cap.micro_batch(m):
            if par.last_stage:
                loss_of(outputs[m], par.sizes).backward()
            else:
                torch.autograd.backward(outputs[m], recv(shape, dtype, nxt))
            if not par.first_stage:
                stale = par.bug == "pp_stale_gradient" and m > 0
                send(inputs[m - 1 if stale else m].grad, prev)
            accumulate(model, par)


def train(rank, args, rdzv):
    torch.set_num_threads(1)
    world = args.tp * args.dp * args.pp * args.cp
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{rdzv}", rank=rank, world_size=world)
    sizes = args.sizes
    par = Parallel(args.tp, args.dp, args.pp, args.cp, args.sp, rank, args.bug, sizes.seq)
    par.sizes = sizes
    par.sample_order = corpus.sample_order(args, sizes.batch)
    par.ac = args.ac
    par.fp8 = args.dtype in ("fp8", "fp8_rowwise", "mxfp8", "nvfp4")
    par.fp8_rowwise = args.dtype == "fp8_rowwise"
    par.block_format = {"mxfp8": MXFP8, "nvfp4": NVFP4}.get(args.dtype)
    dtype = DTYPES[args.dtype]
    per_stage = sizes.layers // args.pp
    first_layer = par.pp_rank * per_stage
    name_map = global_name(first_layer, par)
    torch.manual_seed(0)
    model = GPT(par, range(first_layer, first_layer + per_stage))
    init_weights(model, par, dtype, name_map)
    perturbation = None
    if args.role == "perturbed-reference":
        perturbation = {"relative": ttrace.unit_roundoff(dtype), "seed": args.seed}
        for name, p in model.named_parameters():
            ttrace.perturb_(p.data, seed=args.seed + seed_of(name))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    cap = ttrace.Capture(
        model, args.out, role=args.role, rank=rank, world_size=world,
        mesh={"pp": args.pp, "dp": args.dp, "cp": args.cp, "tp": args.tp} if world > 1 else {},
        parallel={"tp": args.tp, "pp": args.pp, "dp": args.dp, "cp": args.cp, "sp": par.sp},
        zigzag_axes=("cp",),
        dtype_recipe=("fp4" if args.dtype == "nvfp4" else "fp8") if par.fp8 else args.dtype, iterations=range(args.iterations), micro_batches=MICRO_BATCHES,
        placements=placements_of(par), name_map=name_map, perturbation=perturbation,
        rewrite_inputs_from=args.rewrite_inputs, sample_order=par.sample_order,
        modules=hooked_modules(model),
        model_info={"name": "tiny-gpt", "num_layers": sizes.layers, "hidden_size": sizes.hidden,
                    "heads": sizes.heads, "ffn_hidden_size": sizes.ffn, "vocab": sizes.vocab,
                    "seq": sizes.seq, "experts": sizes.experts,
                    "moe_layers": list(sizes.moe_layers), "bug": args.bug or "none"})
    for local, module in model.named_modules():
        if isinstance(module, Fp8Operands):  # the quantized GEMM operands, in fp8 or fp4
            record = cap.record_fp4 if args.dtype == "nvfp4" else cap.record_fp8
            module.record = functools.partial(record, name_map(local), "forward_input")
    for it in range(args.iterations):
        with cap.step(it):
            cap.record_params()
            for p in model.parameters():
                p.grad = None
                p.main_grad = torch.zeros_like(p, dtype=torch.float32)
            if args.pp > 1:
                step_pipeline(model, par, cap, it, dtype)
            else:
                step_no_pipeline(model, par, cap, it)
            reduce_grads(model, par)
            cap.record_param_grads()
            optimizer.step()
            cap.record_updated_params()
    cap.close()
    if world > 1:
        dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    corpus.run_arguments(ap, BUGS, DTYPES)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--dp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1, help="pipeline stages (divide --layers)")
    ap.add_argument("--cp", type=int, default=1, help="context parallelism (zig-zag chunks)")
    ap.add_argument("--sp", action="store_true",
                    help="sequence parallelism (needs --tp > 1; not with --cp)")
    ap.add_argument("--ac", action="store_true",
                    help="activation recompute: every layer's activations recomputed in the "
                         "backward (Megatron's full recompute)")
    ap.add_argument("--config", choices=sorted(CONFIGS),
                    help="a named layout of bugs.CONFIGS instead of --tp/--dp/--pp/--cp/--sp/"
                         "--ac; the references' only layout (a reference on several ranks)")
    ap.add_argument("--rewrite-inputs", metavar="REF_DIR",
                    help="replace every hooked module's inputs by those of the reference trace "
                         "REF_DIR (sliced to the shard): each module checked in isolation")
    defaults = Sizes()
    for field, help_text in (("vocab", "vocabulary"), ("hidden", "hidden size"),
                             ("heads", "attention heads"), ("ffn", "MLP width"),
                             ("seq", "sequence length"), ("layers", "transformer layers"),
                             ("batch", "global sequences per micro-batch"),
                             ("experts", "experts of the last layer's mixture")):
        ap.add_argument(f"--{field}", type=int, default=getattr(defaults, field),
                        help=f"{help_text} (default {getattr(defaults, field)}; the bug corpus's)")
    args = ap.parse_args(argv)
    args.sizes = Sizes(args.vocab, args.hidden, args.heads, args.ffn, args.seq, args.layers,
                       args.batch, args.experts)
    if args.list_bugs:
        json.dump(corpus.table(BUGS, CONFIGS), sys.stdout, indent=2)
        print()
        return
    if not args.out:
        ap.error("--out is required")
    if args.config:
        c = CONFIGS[args.config]
        args.tp, args.dp, args.pp, args.cp, args.sp, args.ac = c.tp, c.dp, c.pp, c.cp, c.sp, c.ac
    if args.role != "distributed":
        args.bug = None  # the references are bug-free
        if not args.config:  # on one device unless laid out by a named layout
            args.tp = args.dp = args.pp = args.cp = 1
            args.sp = args.ac = False
    z = args.sizes
    if z.hidden % z.heads:
        ap.error(f"--hidden {z.hidden} is not a multiple of --heads {z.heads}")
    if z.layers % args.pp or z.heads % args.tp or z.vocab % args.tp or z.batch % args.dp or (
            args.sp and z.seq % args.tp) or z.seq % (2 * args.cp) or z.experts % args.dp or (
            z.ffn % args.tp):
        ap.error(f"tp {args.tp}, dp {args.dp}, pp {args.pp}, cp {args.cp} do not divide the "
                 f"model ({z.layers} layers, {z.heads} heads, FFN {z.ffn}, vocabulary {z.vocab}, "
                 f"{z.batch} sequences of {z.seq}, 2 x cp zig-zag chunks, {z.experts} experts "
                 f"over dp)")
    if args.sp and args.cp > 1:
        ap.error("--sp with --cp is not supported (SP would split the zig-zag chunks)")
    world = args.tp * args.dp * args.pp * args.cp
    if world == 1:
        train(0, args, None)
        return
    corpus.start_ranks(train, args, world)


if __name__ == "__main__":
    main()
