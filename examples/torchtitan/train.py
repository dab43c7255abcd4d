#!/usr/bin/env python3
"""torchtitan's own Llama-3 model and its own parallelize_llama (tensor and sequence
parallelism, FSDP2, activation checkpointing), or its Qwen3 mixture of experts and
parallelize_qwen3 (expert parallelism, load balancing), trained on CPU processes (gloo) and
captured by ttrace in three lines. Nothing of the models or their parallelization is written
here: each is torchtitan 0.3.0's debug flavor shrunk to fewer layers (and experts), built and
parallelized as torchtitan's trainer does, the references too (on one process, where torchtitan
installs FSDP2 over one shard); on_cpu.py lists what torchtitan needs to run on a CPU.

All three runs start from one seed checkpoint, torchtitan's own route to identical initial
weights: the model initialized once on one process and saved with torch.distributed.checkpoint,
then loaded by every run into its own layout (DCP reshards). The perturbed reference perturbs
the loaded weights.

    train.py --config fsdp2_tp2_sp --out /tmp/t/dist
    train.py --role reference --out /tmp/t/ref
    train.py --role perturbed-reference --out /tmp/t/pert
    train.py --model qwen3_moe --config moe_fsdp2_ep2 --out /tmp/t/moe
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
import types
from unittest import mock

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.tensor import DTensor
from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

import ttrace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this trainer, and examples/ (corpus.py)
import corpus  # noqa: E402
import dropout  # noqa: E402
import on_cpu  # noqa: E402
from bugs import BUGS, CONFIGS, MOE_BUGS, MOE_CONFIGS, Config  # noqa: E402

on_cpu.adapt()
from torchtitan.components.checkpointer.base import ModelWrapper  # noqa: E402
from torchtitan.components.loss import CrossEntropyLoss  # noqa: E402
from torchtitan.components.quantization.float8 import Float8LinearConverter  # noqa: E402
from torchtitan.components.quantization.mx import MXFP8LinearConverter  # noqa: E402
from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig  # noqa: E402
from torchtitan.distributed import ParallelDims  # noqa: E402
from torchtitan.distributed import utils as dist_utils  # noqa: E402
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC  # noqa: E402
from torchtitan.models import llama3, qwen3  # noqa: E402
from torchtitan.models.common.attention import ScaledDotProductAttention  # noqa: E402
from torchtitan.models.common.config_utils import (make_moe_config, make_routed_experts_config,  # noqa: E402
                                                   make_router_config)

import patches  # noqa: E402 (imports torchtitan)

MICRO_BATCHES, LR = 2, 0.1
# torchtitan's default: the clean runs' total gradient norm is about 1.03, so every step clips.
# The norm's fp32 round-off then moves all gradients by a common 4e-5, which the checker takes
# out (docs/thresholds.md, "A factor common to the gradients").
MAX_NORM = 1.0
# recipe -> (torchtitan's training.dtype, training.mixed_precision_param): bf16_mp keeps fp32
# weights (the master weights) and computes in bf16 through FSDP2's MixedPrecisionPolicy; fp8
# and mxfp8 compute in bf16 with fp8 GEMMs, scaled per tensor or per block of 32 (model_spec)
DTYPES = {"fp32": ("float32", "float32"), "bf16": ("bfloat16", "bfloat16"),
          "bf16_mp": ("float32", "bfloat16"), "fp8": ("bfloat16", "bfloat16"),
          "mxfp8": ("bfloat16", "bfloat16")}
RECIPES = {"fp32": "fp32", "bf16": "bf16",
           "bf16_mp": {"recipe": "bf16", "compute": "bf16", "params": "fp32", "grads": "fp32"},
           "fp8": "fp8", "mxfp8": "fp8"}
AC = {"full": FullAC, "selective": SelectiveAC}


# --model -> torchtitan's model registry and flavor
MODELS = {"llama3": (llama3.model_registry, "debugmodel"),
          "qwen3_moe": (qwen3.model_registry, "debugmodel_moe")}
EXPERTS, TOP_K = 4, 2  # qwen3's debugmodel_moe has 64 experts, 8 per token


def model_spec(name, layers, seq, config, dtype="fp32"):
    """torchtitan's debug model `name` with its first `layers` blocks (and, for the MoE, fewer
    experts) and RoPE sized to the sequence (as torchtitan's trainer sizes it), its sharding
    declared for `config`, and torchtitan's SDPA attention instead of flex attention (whose
    backward does not run on the CPU)."""
    registry, flavor = MODELS[name]
    # fp8: torchtitan's float8 converter (torchao's Float8Linear, tensorwise scaling), its
    # GEMMs emulated, as torchtitan allows without a GPU; mxfp8: its MXFP8 converter, which
    # asks for a Blackwell GPU (let through here) and whose GEMMs build() emulates
    converters = {"fp8": [Float8LinearConverter.Config(emulate=True,
                                                       model_compile_enabled=False)],
                  "mxfp8": [MXFP8LinearConverter.Config(model_compile_enabled=False)]}
    with mock.patch("torchtitan.components.quantization.mx.has_cuda_capability",
                    lambda *_: True):
        spec = registry(flavor, converters=converters[dtype]) if dtype in converters \
            else registry(flavor)
    model = spec.model
    model.layers = model.layers[:layers]
    for block in model.layers:
        block.attention.inner_attention = ScaledDotProductAttention.Config()
        block.attention.rope = dataclasses.replace(block.attention.rope, max_seq_len=seq)
        if getattr(block, "moe", None) is not None:
            block.moe = fewer_experts(block.moe)
    model.update_from_config(config=types.SimpleNamespace(
        parallelism=parallelism(config), training=TrainingConfig(seq_len=seq)))
    return spec


def fewer_experts(moe):
    """The MoE configuration `moe` with EXPERTS experts, TOP_K per token, built by torchtitan's
    own configuration helpers with everything else as it was."""
    router, experts = moe.router, moe.routed_experts.inner_experts
    return make_moe_config(
        num_experts=EXPERTS, load_balance_coeff=moe.load_balance_coeff,
        shared_experts=moe.shared_experts,
        router=make_router_config(dim=router.gate.in_features, num_experts=EXPERTS,
                                  gate_param_init=router.gate.param_init, top_k=TOP_K,
                                  score_func=router.score_func, route_norm=router.route_norm),
        routed_experts=make_routed_experts_config(dim=experts.dim, hidden_dim=experts.hidden_dim,
                                                  num_experts=EXPERTS, top_k=TOP_K,
                                                  param_init=experts.param_init,
                                                  comm_backend="standard"))


def parallelism(config):
    # torchtitan's default SPMD backend ("spmd_types") fails in parallelize_llama on these
    # meshes ("all parameters must be DTensors on the full SPMD mesh"); "partial_dtensor" is
    # its DTensor path for the model-parallel axes.
    return ParallelismConfig(tensor_parallel_degree=config.tp, data_parallel_shard_degree=config.dp,
                             expert_parallel_degree=config.ep, enable_sequence_parallel=config.sp,
                             spmd_backend="partial_dtensor")


def build(spec, dtype):
    from torchtitan.tools.utils import set_default_dtype

    with torch.device("meta"), set_default_dtype(getattr(torch, DTYPES[dtype][0])):
        model = spec.model.build()
    for module in model.modules():  # torchao's MXFP8 GEMMs emulated (a CPU has none)
        if hasattr(module, "kernel_preference"):
            module.kernel_preference = KernelPreference.EMULATED
    return model


def write_seed_checkpoint(folder, args):
    """torchtitan's seed checkpoint: the model initialized on one process and saved with DCP."""
    torch.manual_seed(0)
    model = build(model_spec(args.model, args.layers, args.seq, Config()), "fp32")
    model.to_empty(device="cpu")
    with torch.no_grad():
        model.init_weights(buffer_device=None)
    dcp.save(ModelWrapper(model).state_dict(), checkpoint_id=folder, no_dist=True)


def parallelized(spec, config, dims, dtype, bug):
    """The model built on the meta device and parallelized by torchtitan's parallelize
    function as its trainer calls it. On one process too: torchtitan installs FSDP2 over one
    shard, whose MixedPrecisionPolicy is the mixed-precision recipe."""
    model = build(spec, dtype)
    # the bug turns off torchtitan's preserve_rng_state (a recomputation then draws its own
    # dropout masks)
    ac = (AC[config.ac].Config(preserve_rng_state=bug != "recompute_rng_state_not_preserved")
          .build() if config.ac else None)
    # torchtitan's default FSDP2 parameter dtype is bf16 whatever the training dtype
    training = (TrainingConfig() if bug == "fsdp_param_dtype_default"
                else TrainingConfig(mixed_precision_param=DTYPES[dtype][1]))
    model = spec.parallelize_fn(model, parallel_dims=dims, training=training,
                                parallelism=parallelism(config),
                                compile_config=CompileConfig(enable=config.compile,
                                                             components=["model"]),
                                ac_config=ac and ac.config, dump_folder="")
    force_sum_reduction(model)
    model.to_empty(device="cpu")
    if bug != "rope_cache_not_initialized":
        with torch.no_grad():  # the weights come from the seed checkpoint, the buffers from here
            model.init_weights(buffer_device=None)
    return model


def force_sum_reduction(model):
    # gloo has no PREMUL_SUM, which FSDP2's reduce-scatter uses when it divides gradients
    # ("Cannot use ReduceOp.PREMUL_SUM with Gloo"); torchtitan disables that division (it
    # scales the loss by the global token count), so a plain sum is the same reduction.
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_force_sum_reduction_for_comms(True)


def tokens(iteration, args, dp, dp_rank, sample_order=None, stream=0):
    """This data-parallel rank's sequences of an iteration and their labels, micro-batch by
    micro-batch, each micro-batch's in `sample_order` when given (a perturbed reference's),
    drawn from data stream `stream` (every rank reads stream 0)."""
    g = torch.Generator().manual_seed(1000 + iteration + 100_000 * stream)
    data = torch.randint(2048, (args.batch, args.seq + 1), generator=g)
    per_micro_batch = args.batch // MICRO_BATCHES
    rows = per_micro_batch // dp
    order = list(range(rows)) if sample_order is None else sample_order
    for m in range(MICRO_BATCHES):
        mine = data[m * per_micro_batch + dp_rank * rows:][:rows][order]
        yield mine[:, :-1], mine[:, 1:]


def clip_counting_replicas(params, max_norm):
    """The bug grad_norm_counts_tp_replicas: a hand-written clipping whose total norm adds up
    the squares of every rank's local gradients over all ranks, so that a parameter replicated
    over the tensor-parallel ranks (the norms' weights) counts once per rank."""
    grads = [p.grad for p in params if p.grad is not None]
    squares = torch.stack([(g.to_local() if isinstance(g, DTensor) else g).float().pow(2).sum()
                           for g in grads]).sum()
    dist.all_reduce(squares)
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, squares.sqrt(), foreach=True)


def train(rank, args, seed, rdzv):
    torch.set_num_threads(1)
    config = args.layout
    patches.apply(args.bug)
    dist.init_process_group("gloo", init_method=f"file://{rdzv}", rank=rank,
                            world_size=config.world)
    dist_utils.set_spmd_backend("partial_dtensor")
    dims = ParallelDims.from_config(parallelism(config), config.world)
    dims.build_mesh()
    mesh = None  # the references' (one process)
    if config.world > 1:
        mesh = dims.get_optional_mesh(["dp_replicate", "fsdp", "tp"], include_singleton_axes=True)
    spec = model_spec(args.model, args.layers, args.seq, config, args.dtype)
    model = parallelized(spec, config, dims, args.dtype, args.bug)
    weights = ModelWrapper(model)
    state = weights.state_dict()
    dcp.load(state, checkpoint_id=seed)
    weights.load_state_dict(state)
    perturbation = None
    if args.role == "perturbed-reference":
        # the round-off of the dtype the model computes in (bf16 for fp32 master weights)
        compute = getattr(torch, DTYPES[args.dtype][1])
        perturbation = {"relative": ttrace.unit_roundoff(compute), "seed": args.seed}
        for i, p in enumerate(model.parameters()):
            ttrace.perturb_(p.data, perturbation["relative"], seed=args.seed + i)
    sample_order = corpus.sample_order(args, args.batch // MICRO_BATCHES)
    loss_fn = CrossEntropyLoss.Config().build()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    if spec.post_optimizer_build_fn is not None:  # the MoE's load balancing (expert bias)
        spec.post_optimizer_build_fn(optimizer, [model],
                                     patches.load_balancing_dims(args.bug, dims))

    dp_rank = mesh.get_local_rank("fsdp") if mesh is not None else 0
    if args.model == "llama3":
        tp_rank = mesh.get_local_rank("tp") if mesh is not None else 0
        dropout.add_hidden_dropout(model, args.batch // MICRO_BATCHES, config.dp, dp_rank,
                                   sample_order, args.seq, config.tp, tp_rank)

    cap = None if args.no_capture else ttrace.Capture(
        model, args.out, role=args.role, mesh=mesh, optimizer=optimizer,
        iterations=range(args.iterations), dtype_recipe=RECIPES[args.dtype],
        perturbation=perturbation, sample_order=sample_order,
        replay_routing_from=args.replay_routing)
    # the bug's data loader is seeded with the global rank: tensor-parallel peers read
    # different sequences
    stream = rank if args.bug == "data_seeded_by_global_rank" else 0
    tokens_total = torch.tensor(args.batch * args.seq)
    seconds = []
    torch.manual_seed(dropout.SEED)  # every run's dropout masks from one generator state
    for iteration in range(args.steps):
        start = time.perf_counter()
        for micro_batch, (x, labels) in enumerate(tokens(iteration, args, config.dp, dp_rank,
                                                         sample_order, stream)):
            if args.bug == "loss_per_micro_batch":
                tokens_total = torch.tensor(labels.numel())
            if args.bug == "zero_grad_per_micro_batch" and micro_batch > 0:
                optimizer.zero_grad()
            loss, _ = loss_fn(model(x), labels, tokens_total)
            loss.backward()
        if args.bug == "grad_norm_counts_tp_replicas":
            clip_counting_replicas(list(model.parameters()), MAX_NORM)
        else:
            dist_utils.clip_grad_norm_(list(model.parameters()), MAX_NORM, foreach=True,
                                       ep_enabled=dims.ep_enabled)
        optimizer.step()
        optimizer.zero_grad()
        seconds.append(time.perf_counter() - start)
    if cap is not None:
        cap.close()
    if args.timings:  # for bench/compile_cost.py
        with open(f"{args.timings}.rank{rank}.json", "w") as f:
            json.dump({"step_seconds": seconds}, f)
    dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    corpus.run_arguments(ap, {**BUGS, **MOE_BUGS}, DTYPES)
    ap.add_argument("--model", choices=sorted(MODELS), default="llama3",
                    help="torchtitan's Llama-3 or Qwen3-MoE debug model (default llama3)")
    ap.add_argument("--config", choices=sorted({**CONFIGS, **MOE_CONFIGS}),
                    help="the layout (bugs.CONFIGS for llama3, bugs.MOE_CONFIGS for qwen3_moe; "
                         "default fsdp2_tp2_sp and moe_fsdp2_ep2); the references run on one "
                         "device unless it is given (a reference on several ranks)")
    ap.add_argument("--layers", type=int, default=2,
                    help="transformer blocks kept of debugmodel's 6 (default 2)")
    ap.add_argument("--seq", type=int, default=32, help="sequence length (default 32)")
    ap.add_argument("--batch", type=int, default=8,
                    help="sequences per iteration, in 2 micro-batches (default 8)")
    ap.add_argument("--steps", type=int,
                    help="iterations to train (default: the captured ones, --iterations, and "
                         "for a compiled configuration one more, which runs compiled: the "
                         "captured ones run eagerly)")
    ap.add_argument("--replay-routing", metavar="REF",
                    help="the MoE's routers take the experts the reference trace REF chose "
                         "(docs/capture.md, \"Routing replay\"): for the perturbed reference "
                         "and the distributed run")
    ap.add_argument("--no-capture", action="store_true",
                    help="train without ttrace (the baseline of bench/compile_cost.py)")
    ap.add_argument("--timings", metavar="PREFIX",
                    help="write each rank's step times to PREFIX.rankN.json")
    ap.add_argument("--seed-checkpoint", metavar="DIR",
                    help="load the initial weights from this DCP checkpoint (default: write "
                         "one for this run, from seed 0)")
    args = ap.parse_args(argv)
    bugs, configs = (BUGS, CONFIGS) if args.model == "llama3" else (MOE_BUGS, MOE_CONFIGS)
    if args.list_bugs:
        json.dump(corpus.table(bugs, configs), sys.stdout, indent=2)
        print()
        return
    if not args.out and not args.no_capture:
        ap.error("--out is required")
    laid_out = args.role == "distributed" or args.config is not None
    args.config = args.config or ("fsdp2_tp2_sp" if args.model == "llama3" else "moe_fsdp2_ep2")
    if args.config not in configs or (args.bug and args.bug not in bugs):
        ap.error(f"--config {args.config} and --bug {args.bug} must be --model {args.model}'s")
    args.layout = configs[args.config] if laid_out else Config()  # references: bug-free
    if args.role != "distributed":
        args.bug = None
    if args.steps is None:
        args.steps = args.iterations + args.layout.compile
    c = args.layout
    if args.batch % (MICRO_BATCHES * c.dp) or (c.sp and args.seq % c.tp):
        ap.error(f"the layout (tp {c.tp}, dp {c.dp}) does not divide the batch {args.batch} "
                 f"in {MICRO_BATCHES} micro-batches or the sequence {args.seq}")
    with tempfile.TemporaryDirectory() as tmp:
        seed = args.seed_checkpoint
        if seed is None:
            seed = os.path.join(tmp, "seed")
            write_seed_checkpoint(seed, args)
        corpus.start_ranks(train, args, c.world, seed)


if __name__ == "__main__":
    main()
