"""The model parallelized with PyTorch's own APIs only, as torchtitan does it: tensor and
sequence parallelism with parallelize_module, FSDP2 with fully_shard (alone, or over the
tensor-parallel DTensors: 2-D), and pipeline stages for torch.distributed.pipelining. The
bugs of bugs.py that live in a parallel plan or setting are injected here."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               RowwiseParallel, SequenceParallel,
                                               parallelize_module)


def pipeline_stage(model, stage, stages):
    """Keeps this stage's layers (global names stay: layers is a ModuleDict) and, on the first
    stage, the embedding, on the last the final norm and output projection."""
    layers = len(model.layers)
    per_stage = layers // stages
    for i in range(layers):
        if i // per_stage != stage:
            del model.layers[str(i)]
    if stage > 0:
        model.tok_embeddings = None
    if stage < stages - 1:
        model.norm = None
        model.output = None
    return model


def apply_tp(model, mesh, sp, bug):
    """Megatron-style tensor parallelism on the `tp` mesh: column-parallel q/k/v and w1/w3,
    row-parallel wo and w2, a vocabulary-parallel embedding and output projection (its
    logits stay sharded for loss_parallel); with sp the norms and the residual stream hold
    sequence chunks."""
    stream = Shard(1) if sp else Replicate()
    if bug == "norm_grad_declared_replicate" and model.norm is not None:
        model.norm = LocalRMSNorm(model.norm)
    top = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=stream),
        "output": ColwiseParallel(input_layouts=stream, output_layouts=Shard(-1),
                                  use_local_output=False),
    }
    if model.norm is not None and sp:
        top["norm"] = SequenceParallel()
    parallelize_module(model, mesh, {k: v for k, v in top.items()
                                     if getattr(model, k) is not None})
    for block in model.layers.values():
        plan = {
            "attention": PrepareModuleInput(input_layouts=(stream,),
                                            desired_input_layouts=(Replicate(),)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=stream),
            "feed_forward": PrepareModuleInput(input_layouts=(stream,),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=stream),
            "feed_forward.w3": ColwiseParallel(),
        }
        if sp:
            plan["attention_norm"] = SequenceParallel()
            if bug != "sp_norm_not_in_plan":
                plan["ffn_norm"] = SequenceParallel()
        parallelize_module(block, mesh, plan)


class LocalRMSNorm(nn.Module):
    """The final norm computed on the local sequence chunk (bug norm_grad_declared_replicate):
    the weight's local copy takes its gradient back as Replicate, so the partial sums of
    the TP ranks are never added up. grad_placements=[Partial()] would be right."""

    def __init__(self, norm):
        super().__init__()
        self.weight = norm.weight
        self.eps = norm.eps

    def forward(self, x):
        local = x.to_local() if isinstance(x, DTensor) else x
        weight = self.weight.to_local()  # the bug: grad_placements=[Partial()] is missing
        out = torch.nn.functional.rms_norm(local, local.shape[-1:], weight, self.eps)
        return DTensor.from_local(out, x.device_mesh, x.placements, run_check=False) \
            if isinstance(x, DTensor) else out


def apply_fsdp(model, mesh, dtype, bug):
    """FSDP2 over the `dp` mesh, per block and at the root. Gradients are summed, not
    averaged: the loss is already normalized by every token of the iteration (gloo has no
    pre-scaled sum, hence the forced sum reduction)."""
    policy = MixedPrecisionPolicy()
    if bug == "fsdp_reduce_dtype_bf16":
        policy = MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)
    elif bug == "fsdp_param_dtype_bf16":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    for block in model.layers.values():
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    for module in model.modules():
        if hasattr(module, "set_gradient_divide_factor"):
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)


@torch.no_grad()
def load_as_plain_shards(model, full):
    """Bug strided_shard_loaded_as_shard: each DTensor parameter gets the slice of its full
    tensor at the offset its placements would give if a _StridedShard were a plain Shard, as a
    loader written before FSDP2 over tensor parallelism cuts it. (FSDP2 shards a
    tensor-parallel dimension right to left: its rows of tp rank 1 on dp rank 0 come after
    all of tp rank 0's.)"""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    for name, p in model.named_parameters():
        if not isinstance(p, DTensor):
            continue
        as_shard = [Shard(q.dim) if isinstance(q, _StridedShard) else q for q in p.placements]
        _, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, as_shard)
        local = p.to_local()
        piece = full[name][tuple(slice(o, o + n) for o, n in zip(offset, local.shape))]
        local.copy_(piece)


def clip_grad_norm(params, max_norm, pp_group, bug):
    """Clips the gradients to a total norm of max_norm: the squared norms of DTensor
    gradients are reduced over their meshes by DTensor itself, plain ones are replicas, and
    the pipeline stages add theirs up."""
    device = next((p.grad.device for p in params if p.grad is not None), None)
    total = torch.zeros((), dtype=torch.float32, device=device)
    for p in params:
        g = p.grad
        if g is None:
            continue
        if isinstance(g, DTensor):
            g = g.to_local() if bug == "grad_clip_local_shards" else g
            square = g.float().square().sum()
            total += square.full_tensor() if isinstance(square, DTensor) else square
        else:
            total += g.float().square().sum()
    if pp_group is not None and bug != "grad_clip_per_stage":
        dist.all_reduce(total, group=pp_group)
    coefficient = torch.clamp(max_norm / (total.sqrt() + 1e-6), max=1.0)
    for p in params:
        if p.grad is not None:
            p.grad.mul_(float(coefficient))
    return total.sqrt()
