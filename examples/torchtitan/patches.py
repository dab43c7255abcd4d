"""Each bug of bugs.py that lives in torchtitan's code, as a change to it: `apply(bug)` patches
the torchtitan module that holds the mistake, for the rest of the process (one run), and
`load_balancing_dims` hands the MoE's load-balancing hook the parallel dimensions the bug
gives it; the training loop's own bugs are in train.py."""

import types

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Replicate
from torchao.float8 import float8_utils
from torchtitan.components import loss
from torchtitan.distributed import fsdp
from torchtitan.models.common import embedding, token_dispatcher


def apply(bug):
    if bug == "fsdp_grad_divided_twice":
        # FSDP2's default gradient division (by the data-parallel degree) left on, although
        # the loss is already divided by the global token count.
        fsdp.disable_fsdp_gradient_division = lambda model: None
    elif bug == "embedding_offset_by_global_rank":
        # The vocabulary-parallel embedding's shard offset taken from the global rank, not
        # the rank in the tensor-parallel group.
        embedding.dist = types.SimpleNamespace(get_world_size=dist.get_world_size,
                                               get_rank=lambda group=None: dist.get_rank())
    elif bug == "ep_combine_not_unpermuted":
        # The expert-parallel combine sends the experts' outputs back in expert-major order
        # without inverting the dispatch's permutation: tokens get other tokens' outputs.
        token_dispatcher.AllToAllTokenDispatcher._unpermute = (
            lambda self, routed_output, input_shape, permuted_indices: routed_output)
    elif bug == "float8_amax_of_the_shard":
        # torchao's tensorwise fp8 scale taken from the amax of this rank's shard of a
        # DTensor, not the whole tensor's (declared replicated all the same).
        float8_utils.tensor_to_amax = _amax_of_the_shard
    elif bug == "loss_parallel_backward_unmasked":
        backward = loss._LossParallelCrossEntropy.backward
        loss._LossParallelCrossEntropy.backward = staticmethod(
            lambda ctx, grad_output: _unmasked(backward, ctx, grad_output))


def _amax_of_the_shard(x, reduce_amax=False, device_mesh=None, scaling_granularity=None,
                       axiswise_dim=None):
    amax = torch.max(torch.abs(x.to_local() if isinstance(x, DTensor) else x))
    if not isinstance(x, DTensor):
        return amax
    return DTensor.from_local(amax, x.device_mesh, [Replicate()] * x.device_mesh.ndim,
                              run_check=False)


def _unmasked(backward, ctx, grad_output):
    """The vocabulary-parallel cross-entropy's backward with the one-hot of the label written
    on every rank: a label outside a rank's vocabulary shard lands on its shard's first
    column (the clamped index) instead of nowhere."""
    grads = backward(ctx, grad_output)
    _, labels = ctx.saved_tensors
    outside = (labels < ctx.vocab_start) | (labels >= ctx.vocab_start + ctx.local_vocab_size)
    flat = grads[0].view(-1, ctx.local_vocab_size)
    flat[:, 0] -= outside.to(flat.dtype) * grad_output.to(flat.dtype)
    return grads


def load_balancing_dims(bug, dims):
    """The ParallelDims the MoE's load-balancing hook is registered with: for the bug, a view
    without the "loss" mesh, over which the hook sums the tokens each expert received: each
    data-parallel rank then moves its expert biases by its own tokens' counts."""
    if bug != "expert_bias_counts_not_reduced":
        return dims
    view = types.SimpleNamespace(**{a: getattr(dims, a) for a in ("ep_enabled", "tp")})
    view.get_optional_mesh = lambda name: None if name == "loss" else dims.get_optional_mesh(name)
    view.get_mesh = dims.get_mesh
    return view
