"""Consistent tensor generation and the perturbation of the perturbed reference.

A distributed run can only be compared with a single-device reference if every shard of its
weights and inputs equals the matching slice of the reference's. `consistent_randn` makes a
value depend only on its global coordinates (and the seed), never on the layout, by drawing the
whole global tensor from a seeded CPU generator and slicing it. That costs O(global size) per
shard, which is fine for the small models a debugging run uses; a large model would need a
counter-based generator indexed by global position instead."""

import torch

_UNIT_ROUNDOFF = {
    torch.float32: 2.0**-24,
    torch.bfloat16: 2.0**-8,
    torch.float16: 2.0**-11,
    torch.float64: 2.0**-53,
}


def unit_roundoff(dtype):
    """Unit round-off (half the machine epsilon) of a torch floating dtype."""
    return _UNIT_ROUNDOFF[dtype]


def _index(index, ndim):
    """index: None (whole tensor), a tuple of slices, or per-dimension (start, stop) ranges as
    in a Layout (several ranges in one dimension are concatenated)."""
    if index is None:
        return None
    if all(isinstance(i, slice) for i in index):
        return tuple(index)
    rows = []
    for dim in index:
        rows.append(torch.cat([torch.arange(a, b) for a, b in dim]))
    if len(rows) != ndim:
        raise ValueError(f"{len(rows)} dimensions of ranges for a tensor of {ndim}")
    return torch.meshgrid(*rows, indexing="ij")


def consistent_randn(global_shape, seed, index=None, dtype=torch.float32, scale=1.0):
    """The shard `index` of a standard-normal global tensor of `global_shape` drawn with `seed`,
    times `scale`, cast to `dtype`. Equal (seed, global_shape) give equal values at equal global
    coordinates whatever the sharding."""
    g = torch.Generator().manual_seed(seed)
    full = torch.randn(tuple(global_shape), generator=g, dtype=torch.float32) * scale
    idx = _index(index, len(global_shape))
    part = full if idx is None else full[idx]
    return part.to(dtype).contiguous()


@torch.no_grad()
def perturb_(tensor, relative=None, seed=0):
    """Multiplies `tensor` in place by (1 + relative * r), r uniform in [-1, 1] from `seed`.
    relative defaults to the unit round-off of the tensor's dtype. A DTensor must be whole on
    this rank (a single-device run's parameters under FSDP2 on one rank, for its mixed
    precision). Returns the tensor."""
    if relative is None:
        relative = unit_roundoff(tensor.dtype)
    if hasattr(tensor, "to_local"):
        local = tensor.to_local()
        if local.shape != tensor.shape:
            raise ValueError(f"perturb_: a DTensor of shape {list(tensor.shape)} held in pieces "
                             f"({list(local.shape)} here): perturb the model before sharding it")
        perturb_(local, relative, seed)
        return tensor
    g = torch.Generator().manual_seed(seed)
    r = torch.rand(tensor.shape, generator=g, dtype=torch.float64) * 2 - 1
    factor = (1 + relative * r).to(tensor.device)
    tensor.copy_((tensor.double() * factor).to(tensor.dtype))
    return tensor
