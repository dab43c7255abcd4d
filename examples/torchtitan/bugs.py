"""The torchtitan trainer's layouts and its corpus of silent bugs: the kind torchtitan-class
training code has had. Each bug says what it does, what real mistake it is modelled on, the
layouts and recipes it shows in, and what ttrace must name: the root-cause module (or
PARAMETER_GRADIENTS when the first faulty tensors are parameter gradients) and, for a
rank-specific bug, the ranks of the faulty shard."""

import functools
from dataclasses import dataclass

import corpus
from corpus import PARAMETER_GRADIENTS  # noqa: F401 (detect.py imports it here)


@dataclass(frozen=True)
class Config:
    """A layout as torchtitan's own configuration sets it: tensor parallel degree (tp, with
    sequence parallelism when sp), FSDP2 shard degree (dp), expert parallel degree (ep, over
    the dp x tp ranks), and activation checkpointing ("full": every block recomputed;
    "selective": torchtitan's per-op policy). torchtitan's dense mesh is (pp, dp_replicate,
    fsdp, tp), tp fastest."""
    tp: int = 1
    dp: int = 1
    sp: bool = False
    ac: str = ""
    ep: int = 1
    compile: bool = False  # torchtitan's per-block torch.compile (inductor)

    @property
    def world(self):
        return self.tp * self.dp

    def ranks(self, **coords):
        """Ranks whose mesh coordinates match `coords` (axis -> index)."""
        return [r for r in range(self.world)
                if all({"tp": r % self.tp, "dp": r // self.tp}[a] == c
                       for a, c in coords.items())]


CONFIGS = {
    "tp2": Config(tp=2),
    "tp2_sp": Config(tp=2, sp=True),
    "fsdp2": Config(dp=2),
    "fsdp2_ac": Config(dp=2, ac="full"),
    "tp2_sp_sac": Config(tp=2, sp=True, ac="selective"),
    "fsdp2_tp2_sp": Config(dp=2, tp=2, sp=True),
    "fsdp2_compile": Config(dp=2, compile=True),
}

# Every bug shows in fp32 and bf16 unless it says otherwise; bf16_mp (FSDP2 mixed precision)
# where named.
Bug = functools.partial(corpus.Bug, dtypes=("fp32", "bf16"))

BUGS = {b.name: b for b in [
    Bug("fsdp_grad_divided_twice",
        "FSDP2 divides the reduce-scattered gradients by the data-parallel degree, although "
        "torchtitan's loss is already divided by the global token count: every gradient is "
        "halved",
        "FSDP2's default gradient division left on (torchtitan turns it off with "
        "set_gradient_divide_factor(1.0) in apply_fsdp_to_decoder)",
        ("fsdp2", "fsdp2_ac", "fsdp2_tp2_sp"), PARAMETER_GRADIENTS,
        dtypes=("fp32", "bf16", "bf16_mp")),
    Bug("embedding_offset_by_global_rank",
        "the vocabulary-parallel embedding takes its shard's first token id from the global "
        "rank instead of the rank in the tensor-parallel group: on the second data-parallel "
        "row of the mesh no token falls in the rank's shard and the embedding outputs zeros",
        "dist.get_rank() without the tensor-parallel group (a 1-D TP run cannot tell them "
        "apart)",
        ("fsdp2_tp2_sp",), "tok_embeddings", lambda c: c.ranks(dp=1)),
    Bug("loss_parallel_backward_unmasked",
        "the vocabulary-parallel cross-entropy's hand-written backward writes the label's -1 "
        "on every rank: a label outside the rank's vocabulary shard lands on the shard's "
        "first column (its clamped index)",
        "the out-of-shard mask forgotten in a fused vocabulary-parallel cross-entropy "
        "backward (Megatron's vocab_parallel_cross_entropy masks it)",
        ("tp2", "tp2_sp", "fsdp2_tp2_sp"), "lm_head", gradient_from="loss"),
    Bug("fsdp_param_dtype_default",
        "a tensor-parallel fp32 run computes in bf16: torchtitan installs FSDP2 even on one "
        "data-parallel shard, and its MixedPrecisionPolicy takes training's "
        "mixed_precision_param, whose default is bfloat16, not the training dtype",
        "an fp32 numerics run configured with training.dtype only",
        ("tp2", "tp2_sp"), "tok_embeddings", dtypes=("fp32",)),
    Bug("loss_per_micro_batch",
        "with gradient accumulation, each micro-batch's loss is divided by its own token count "
        "instead of the iteration's global token count: the gradients are "
        "(micro-batches x data-parallel degree) times too large",
        "the gradient-accumulation normalization bug (a mean loss per micro-batch summed "
        "over micro-batches), which torchtitan's global_valid_tokens exists to avoid",
        ("fsdp2", "tp2_sp"), "lm_head", gradient_from="loss", dtypes=("fp32", "bf16", "bf16_mp")),
    Bug("zero_grad_per_micro_batch",
        "the optimizer's zero_grad() runs before every micro-batch's backward instead of "
        "once per iteration: the step sees the last micro-batch's gradients only",
        "zero_grad() moved into the gradient-accumulation loop",
        ("fsdp2", "tp2_sp"), PARAMETER_GRADIENTS),
    Bug("data_seeded_by_global_rank",
        "the data loader is seeded with the global rank: tensor-parallel peers, which must "
        "read the same sequences, read different ones",
        "a sampler seeded or sharded by the global rank instead of the data-parallel rank",
        ("tp2_sp", "fsdp2_tp2_sp"), "tok_embeddings"),
    Bug("rope_cache_not_initialized",
        "the model is materialized with to_empty() and its weights loaded from the seed "
        "checkpoint, but init_weights() is skipped: the RoPE cache, a non-persistent buffer "
        "that no checkpoint holds, keeps uninitialized memory",
        "initialization skipped because \"the checkpoint has the weights\"",
        ("tp2_sp", "fsdp2"), "layers.0.attention.rope"),
    Bug("grad_norm_counts_tp_replicas",
        "a hand-written gradient clipping sums the squares of every rank's local gradients "
        "over all ranks: the norms' weights, replicated over the tensor-parallel ranks, count "
        "once per rank, the total norm comes out 0.3% too large and every gradient is clipped "
        "0.3% too far (fp32 only: bf16's thresholds are wider)",
        "the tensor-parallel duplicates counted in the gradient norm (Megatron's "
        "param_is_not_tensor_parallel_duplicate exists to leave them out)",
        ("tp2_sp", "fsdp2_tp2_sp"), PARAMETER_GRADIENTS, dtypes=("fp32",)),
    Bug("float8_amax_of_the_shard",
        "torchao's fp8 training (torchtitan's float8 converter, tensorwise scaling) takes a "
        "tensor-parallel weight's or activation's amax over this rank's shard only: each rank "
        "scales its shard by its own amax, and the GEMM's operands are quantized on grids "
        "that are not the whole tensor's. It shows first at the attention's row-parallel "
        "output projection, whose input each rank holds a part of the features of",
        "the amax all-reduce over the tensor-parallel group missing from a hand-written fp8 "
        "cast (torchao's amax of a DTensor reduces over its mesh; TransformerEngine reduces "
        "over its amax_reduction_group)",
        ("tp2_sp", "fsdp2_tp2_sp"), "layers.0.attention.wo", dtypes=("fp8",)),
    Bug("recompute_rng_state_not_preserved",
        "activation checkpointing runs with torchtitan's preserve_rng_state off: each block's "
        "recomputation in the backward draws its attention dropout mask from the generator's "
        "current state instead of the forward's, so the gradients are computed through other "
        "masks than the forward applied, and every later forward draws other masks too",
        "preserve_rng_state=False (it saves copying the RNG state, and torchtitan's own models "
        "have no random operator) kept for a model with dropout",
        ("fsdp2_ac", "tp2_sp_sac"), "layers.0.attention_dropout"),
]}

# The Qwen3-MoE debug model's layouts and bugs.
MOE_CONFIGS = {
    "moe_fsdp2": Config(dp=2),
    "moe_fsdp2_ep2": Config(dp=2, ep=2),
}

MOE_BUGS = {b.name: b for b in [
    Bug("expert_bias_counts_not_reduced",
        "the load-balancing hook sums the tokens each expert received on this rank only: each "
        "data-parallel rank moves its expert biases by its own counts, and from the second "
        "iteration on the ranks route tokens by different biases",
        "the all-reduce of tokens_per_expert over the data-parallel (loss) mesh missing from "
        "an auxiliary-loss-free load-balancing update",
        ("moe_fsdp2", "moe_fsdp2_ep2"), "layers.0.moe.router",
        dtypes=("fp32", "bf16", "bf16_mp")),
    Bug("ep_combine_not_unpermuted",
        "the expert-parallel combine sends the experts' outputs back in expert-major order "
        "without inverting the dispatch's permutation: each token receives another token's "
        "expert output",
        "a token unpermutation skipped or applied with the wrong indices around the "
        "all-to-all combine",
        ("moe_fsdp2_ep2",), "layers.0.moe.routed_experts", dtypes=("fp32", "bf16", "bf16_mp")),
]}
