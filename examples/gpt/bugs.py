"""The corpus of silent bugs of the tiny GPT trainer and the parallel configurations it runs in.

Each bug is modelled on a real Megatron-LM bug, switched on by `train.py --bug NAME`, and
comes with the configurations it shows in and where ttrace must localize it: the root-cause
module and, where the bug is rank-specific, the ranks of the faulty shard. detect.py runs
every bug in each of its configurations and checks the checker's answer against this table;
docs/capture.md describes it."""

from dataclasses import dataclass

import torch

import ttrace
from corpus import PARAMETER_GRADIENTS, Bug  # noqa: F401 (detect.py and samples.py import it here)
from model import Sizes, seed_of

# The corpus is defined at the default sizes, the ones detect.py runs.
LAYERS, HIDDEN = Sizes().layers, Sizes().hidden


@dataclass(frozen=True)
class Config:
    """A layout of the distributed run. Ranks are row-major over (pp, dp, cp, tp)."""

    tp: int = 1
    dp: int = 1
    pp: int = 1
    cp: int = 1
    sp: bool = False
    ac: bool = False  # activation recompute of every layer

    @property
    def world(self):
        return self.tp * self.dp * self.pp * self.cp

    def args(self):
        return (["--tp", str(self.tp), "--dp", str(self.dp), "--pp", str(self.pp), "--cp",
                 str(self.cp)] + (["--sp"] if self.sp else []) + (["--ac"] if self.ac else []))

    def ranks(self, pp=None, tp=None):
        """Ranks with pipeline stage `pp` and / or TP rank `tp` (any when None)."""
        out = []
        for r in range(self.world):
            p, t = r // (self.dp * self.cp * self.tp), r % self.tp
            if (pp is None or p == pp) and (tp is None or t == tp):
                out.append(r)
        return out


CONFIGS = {
    "tp2": Config(tp=2),
    "tp2_sp": Config(tp=2, sp=True),
    "dp2": Config(dp=2),
    "pp2": Config(pp=2),
    "pp2_ac": Config(pp=2, ac=True),
    "tp2_dp2": Config(tp=2, dp=2),
    "pp2_tp2_sp": Config(tp=2, pp=2, sp=True),
    "cp2": Config(cp=2),
    "cp2_tp2": Config(cp=2, tp=2),
}

FIRST_STAGE_2 = f"layers.{LAYERS // 2}"  # the first layer of the second of two stages
LAST_STAGE_1 = f"layers.{LAYERS // 2 - 1}"  # the last layer of the first of two stages
# The root cause of a bug in the gradient reduction itself: no module computes it, so ttrace
# must name a parameter gradient whose module's activations are all within tolerance (the
# first one over the threshold; in fp32 and bf16 embedding.weight's).


def tp_ranks_without_amax(weight, global_shape, partition_dim):
    """Ranks of the TP ranks whose shard of the bf16 parameter `weight` (drawn as
    model.init_weights draws it) does not hold the whole tensor's amax: quantized with their
    own amax, only they get another scale than the reference's."""
    def ranks(config):
        w = ttrace.consistent_randn(global_shape, seed_of(weight), dtype=torch.bfloat16,
                                    scale=global_shape[-1] ** -0.5).abs()
        amax = w.max()
        shards = w.chunk(config.tp, partition_dim)
        return [r for t, s in enumerate(shards) if s.max() < amax for r in config.ranks(tp=t)]

    return ranks


BUGS = {b.name: b for b in [
    Bug("sp_norm_grad_no_allreduce",
        "under sequence parallelism the layer-norm (and row-parallel bias) weight gradients are "
        "not all-reduced over TP: each TP rank keeps the gradient of its own sequence chunk",
        "Megatron-LM layer-norm gradients with TP+SP (allreduce_layernorm_grads skipped)",
        ("tp2_sp", "pp2_tp2_sp"), "layers.0.norm1"),
    Bug("row_bias_every_rank",
        "row-parallel linears add their bias on every TP rank before the reduction, so the "
        "output carries tp times the bias",
        "RowParallelLinear bias added before the all-reduce / reduce-scatter",
        ("tp2", "tp2_sp"), "layers.0.attn.proj"),
    Bug("dp_grad_scale",
        "the data-parallel gradient reduction divides the summed gradients by dp although "
        "every rank's loss is already normalized by the global token count",
        "gradient averaging with the wrong scale (loss and all-reduce both divided by dp)",
        ("dp2", "tp2_dp2"), PARAMETER_GRADIENTS),
    Bug("tied_embedding_grad_unsynced",
        "the tied word-embedding gradients of the first and last pipeline stage are not "
        "all-reduced over the embedding group, so each stage updates its copy with half of it",
        "shared embedding / output-layer gradients not synchronized across pipeline stages",
        ("pp2", "pp2_tp2_sp"), "embedding"),
    Bug("cross_entropy_no_max_allreduce",
        "the vocab-parallel cross-entropy subtracts each rank's own logit maximum instead of "
        "the maximum all-reduced over TP",
        "vocab-parallel cross-entropy without the max all-reduce",
        ("tp2", "pp2_tp2_sp"), "loss",
        mislocalized={"fp8 vs tp2_dp2": (
            "in fp8 the bug takes the loss's input gradient only just past its threshold "
            "(1.03 against a single-device reference); a `tp2_dp2` reference's own rounding "
            "leaves it at 0.97, and the first tensor over is a bias gradient of the last "
            "layer, at 1.03")}),
    Bug("qkv_input_grad_no_allreduce",
        "the column-parallel QKV projection does not all-reduce its input gradient over TP "
        "(Megatron's f operator broken), so each TP rank keeps a partial gradient",
        "attention input gradient not all-reduced across TP",
        ("tp2", "tp2_dp2"), f"layers.{LAYERS - 1}.attn.qkv"),
    Bug("dropout_tp_inconsistent",
        "the hidden dropout after attention draws its mask from an RNG seeded per TP rank, so "
        "TP ranks drop different elements of what must be one mask",
        "dropout randomness inconsistent across TP ranks (model-parallel RNG tracker misuse)",
        ("tp2", "tp2_sp"), "layers.0.drop1",
        lambda c: [r for t in range(1, c.tp) for r in c.ranks(tp=t)], dtypes=("fp32", "bf16")),
    Bug("recompute_rng_tracker_not_restored",
        "every layer's activations are recomputed in the backward, and under the pipeline's "
        "all-forwards-first schedule the recomputation of micro-batch 0 draws the dropout "
        "masks of micro-batch 1, whose forward ran last: the gradients flow through masks "
        "the forward never applied",
        "torch.utils.checkpoint in place of Megatron's tensor_parallel.checkpoint, which also "
        "saves and restores the model-parallel RNG tracker's states (torch's restores only "
        "torch's own RNG state)",
        ("pp2_ac",), "layers.0.attn.core", lambda c: c.ranks(pp=0), dtypes=("fp32", "bf16")),
    Bug("microbatch_grad_double_count",
        "after a micro-batch's gradients are added to the fp32 main_grad the parameter's "
        "grad is not reset, so earlier micro-batches are counted again",
        "gradient accumulation fusion counting micro-batch gradients twice",
        ("dp2", "pp2"), PARAMETER_GRADIENTS),
    Bug("sp_allgather_wrong_order",
        "the sequence-parallel all-gather in front of the column-parallel layers concatenates "
        "the sequence chunks in reversed rank order",
        "SP all-gather assembling chunks in the wrong order",
        ("tp2_sp",), "layers.0.attn.qkv"),
    Bug("pp_stale_activation",
        "a pipeline stage sends the previous micro-batch's activation (a reused send buffer) "
        "for every micro-batch after the first",
        "pipeline p2p sending a stale activation buffer",
        ("pp2", "pp2_tp2_sp"), FIRST_STAGE_2,
        lambda c: c.ranks(pp=1)),
    Bug("pp_stale_gradient",
        "a pipeline stage sends the previous micro-batch's input gradient back (a reused send "
        "buffer) for every micro-batch after the first",
        "pipeline p2p sending a stale gradient buffer in the backward",
        ("pp2", "pp2_tp2_sp"), LAST_STAGE_1,
        lambda c: c.ranks(pp=0), gradient_from=FIRST_STAGE_2),
    Bug("embedding_no_vocab_mask",
        "the vocab-parallel embedding does not zero the rows of tokens owned by other TP "
        "ranks before the all-reduce",
        "VocabParallelEmbedding input mask not applied",
        ("tp2",), "embedding"),
    Bug("attn_scale_local_heads",
        "core attention derives the head dimension from the partition's width and the global "
        "number of heads, so the softmax scale is sqrt(tp) too large",
        "attention heads per partition miscomputed under TP",
        ("tp2",), "layers.0.attn.core", dtypes=("fp32", "bf16")),
    Bug("cp_attn_backward_wrong_chunk",
        "the context-parallel attention backward returns the key/value gradient of the "
        "contiguous chunk cp_rank instead of the rank's zig-zag chunks",
        "context-parallel attention backward using the wrong chunk",
        ("cp2", "cp2_tp2"), f"layers.{LAYERS - 1}.attn.core"),
    Bug("cp_causal_mask_local_positions",
        "context-parallel attention builds the causal mask from the queries' local index "
        "instead of their global zig-zag positions",
        "causal mask of load-balanced (zig-zag) context parallelism built on local positions",
        ("cp2",), "layers.0.attn.core"),
    Bug("moe_expert_offset",
        "an expert-parallel rank numbers its experts from its rank instead of rank x experts "
        "per rank, so on every rank but the first, tokens run through another local expert",
        "MoE tokens routed to the wrong expert offset (local expert indices)",
        ("dp2", "tp2_dp2"), f"layers.{LAYERS - 1}.mlp"),
    Bug("moe_router_tp_unsynced",
        "each TP rank initializes the MoE router from its own seed, so the replicated router "
        "weights differ across TP from the start",
        "MoE router weights not kept in sync across TP",
        ("tp2", "tp2_sp"), f"layers.{LAYERS - 1}.mlp.router",
        lambda c: [r for t in range(1, c.tp) for r in c.ranks(tp=t)]),
    Bug("fp8_amax_not_reduced",
        "the fp8 recipe quantizes each shard with its own amax instead of the amax all-reduced "
        "over the ranks holding the tensor",
        "fp8 amax not reduced across the TP group",
        ("tp2", "tp2_dp2"), "layers.0.attn.qkv",
        # its values stay within the fp8 round-off; the scale of the first quantized shard
        # (the QKV weight) gives it away
        tp_ranks_without_amax("layers.0.attn.qkv.weight", (3 * HIDDEN, HIDDEN), 0),
        dtypes=("fp8",)),
    Bug("fp8_rowwise_amax_not_reduced",
        "the row-wise fp8 recipe scales each row of a row-parallel linear's operands by the "
        "amax of this rank's part of the row instead of the whole row's, all-reduced over TP",
        "row-wise fp8 scales computed on the local shard of a row split by tensor parallelism",
        # the attention projection is the first row-parallel linear; its input's row scales
        # give it away, on whichever rank does not hold a row's largest element
        ("tp2", "tp2_sp"), "layers.0.attn.proj", dtypes=("fp8_rowwise",)),
    Bug("mx_block_amax_not_reduced",
        "the MXFP8 recipe scales each 32-element block of a row-parallel linear's operands by "
        "the amax of this rank's part of the block where tensor parallelism splits the block, "
        "instead of the whole block's, all-reduced over TP",
        "MX block scale computed over a shard's partial block",
        # the attention projection's inner dimension (hidden 16) splits its only block in two;
        # its input's block scales give it away, on whichever rank lacks a block's largest
        ("tp2", "tp2_sp"), "layers.0.attn.proj", dtypes=("mxfp8", "nvfp4")),
    Bug("mx_scales_wrong_axis",
        "the MXFP8 recipe quantizes a column-parallel linear's weight shard as if it were still "
        "transposed for the TP split: its 32-element blocks run along the output features "
        "instead of the inner dimension (the values dequantize right, the layout does not)",
        "MX scales laid along the wrong axis after a transpose for the TP split",
        # the QKV weight is the first column-parallel one quantized; every TP rank holds a shard
        ("tp2", "tp2_dp2"), "layers.0.attn.qkv", dtypes=("mxfp8", "nvfp4")),
    Bug("nvfp4_gather_amax_not_reduced",
        "under SP the NVFP4 recipe quantizes each rank's sequence chunk of a column-parallel "
        "linear's input before the all-gather with the amax of that chunk instead of the "
        "whole tensor's, and every rank dequantizes the gathered chunks with its own chunk's "
        "tensor scale",
        "NVFP4 tensor scale not reduced before the low-precision all-gather of SP",
        # fc1's input is the first gathered one whose sequence chunks differ in their amax (the
        # QKV input's, a layer norm of 16 features, share theirs): the chunk from the other TP
        # rank dequantizes with this rank's tensor scale, and the TP replicas disagree
        ("tp2_sp", "pp2_tp2_sp"), "layers.0.mlp.fc1", dtypes=("nvfp4",)),
]}
