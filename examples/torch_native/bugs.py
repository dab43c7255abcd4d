"""The torch-native trainer's layouts and its corpus of silent bugs: the kind DTensor-based
training code (torchtitan-, FSDP2-class) has had. Each bug says what it does, what real
mistake it is modelled on, the layouts and recipes it shows in, and what ttrace must name:
the root-cause module (or PARAMETER_GRADIENTS when the first faulty tensors are parameter
gradients) and, for a rank-specific bug, the ranks of the faulty shard."""

import functools
from dataclasses import dataclass

import corpus
from corpus import PARAMETER_GRADIENTS  # noqa: F401 (detect.py imports it here)


@dataclass(frozen=True)
class Config:
    """A layout: tensor parallel (tp, with sequence parallelism when sp), FSDP2 (dp), and
    pipeline stages (pp, 1F1B). The device mesh is (pp, dp, tp), tp fastest."""
    tp: int = 1
    dp: int = 1
    pp: int = 1
    sp: bool = False

    @property
    def world(self):
        return self.tp * self.dp * self.pp

    def mesh(self):
        return {a: n for a, n in (("pp", self.pp), ("dp", self.dp), ("tp", self.tp)) if n > 1}

    def ranks(self, **coords):
        """Ranks whose mesh coordinates match `coords` (axis -> index)."""
        sizes = {"pp": self.pp, "dp": self.dp, "tp": self.tp}
        out = []
        for rank in range(self.world):
            rest, at = rank, {}
            for axis in ("tp", "dp", "pp"):
                at[axis], rest = rest % sizes[axis], rest // sizes[axis]
            if all(at[a] == c for a, c in coords.items()):
                out.append(rank)
        return out


CONFIGS = {
    "tp2": Config(tp=2),
    "tp2_sp": Config(tp=2, sp=True),
    "fsdp2": Config(dp=2),
    "fsdp2_tp2_sp": Config(dp=2, tp=2, sp=True),
    "pp2": Config(pp=2),
}

# Every bug shows in fp32 and bf16 unless it says otherwise.
Bug = functools.partial(corpus.Bug, dtypes=("fp32", "bf16"))


BUGS = {b.name: b for b in [
    Bug("sp_norm_not_in_plan",
        "the feed-forward RMSNorm is left out of the sequence-parallel plan: it normalizes its "
        "rank's sequence chunk correctly, but its weight is a plain tensor whose gradient "
        "(from that chunk only) is never reduced over TP",
        "a norm missing from parallelize_module's SequenceParallel entries",
        ("tp2_sp", "fsdp2_tp2_sp"), ("layers.0.ffn_norm", "layers.1.ffn_norm")),
    Bug("norm_grad_declared_replicate",
        "the final RMSNorm computes on its local sequence chunk with weight.to_local(), whose "
        "gradient placement defaults to Replicate although each rank's gradient is a partial "
        "sum: the weight gradient is never reduced over TP",
        "to_local() without grad_placements=[Partial()] (a Partial gradient declared Replicate)",
        ("tp2_sp", "fsdp2_tp2_sp"), "norm"),
    Bug("loss_on_local_vocab",
        "the cross-entropy is computed on logits.to_local(), each rank's vocabulary shard, "
        "instead of under loss_parallel() on the vocabulary-sharded DTensor",
        "loss_parallel forgotten (use_local_output mismatch at the output projection)",
        ("tp2", "fsdp2_tp2_sp"), "output", gradient_from="loss"),
    Bug("grad_clip_local_shards",
        "gradient clipping takes the norm of each rank's local gradient shards instead of the "
        "DTensors' global norm, so every rank clips with its own coefficient",
        "clip_grad_norm_ rewritten over to_local() shards to avoid a DTensor mesh error",
        ("fsdp2", "fsdp2_tp2_sp"), PARAMETER_GRADIENTS),
    Bug("grad_clip_per_stage",
        "gradient clipping sums the squared gradient norms of this pipeline stage only: the "
        "stages, whose parameters live on different meshes, clip with different norms",
        "total gradient norm not all-reduced over the pipeline stages",
        ("pp2",), PARAMETER_GRADIENTS),
    Bug("fsdp_reduce_dtype_bf16",
        "FSDP2's MixedPrecisionPolicy reduces gradients in bf16 in an fp32 run",
        "MixedPrecisionPolicy(reduce_dtype=torch.bfloat16) left from a bf16 recipe",
        ("fsdp2", "fsdp2_tp2_sp"), PARAMETER_GRADIENTS, dtypes=("fp32",)),
    Bug("fsdp_param_dtype_bf16",
        "FSDP2's MixedPrecisionPolicy casts the parameters to bf16 for the forward and "
        "backward of an fp32 run",
        "MixedPrecisionPolicy(param_dtype=torch.bfloat16) applied to an fp32 recipe",
        ("fsdp2",), "tok_embeddings", dtypes=("fp32",)),
    Bug("pp_loss_scaled_twice",
        "the pipeline schedule divides the gradients by the number of micro-batches "
        "(scale_grads=True) although the loss is already normalized by every token of the "
        "iteration",
        "pipelining schedule's scale_grads not matched to the loss function",
        ("pp2",), PARAMETER_GRADIENTS),
    Bug("strided_shard_loaded_as_shard",
        "weights are loaded into the FSDP2 + TP parameters at the offsets a plain Shard would "
        "give, but FSDP2 over a tensor-parallel dimension shards right to left "
        "(_StridedShard): the ranks off the first row of the mesh get other rows",
        "a hand-written checkpoint loader that treats _StridedShard as Shard",
        ("fsdp2_tp2_sp",), "tok_embeddings",
        lambda c: sorted(c.ranks(dp=0, tp=1) + c.ranks(dp=1, tp=0))),
    Bug("dp_same_batch",
        "every data-parallel rank reads the first rank's share of the batch",
        "a data loader whose sampler is not split over the data-parallel ranks",
        ("fsdp2",), "tok_embeddings", lambda c: c.ranks(dp=1)),
]}
