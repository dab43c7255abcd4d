"""Where a DTensor's local shard sits in the global tensor, read from the DTensor itself.

A DTensor carries its global shape, its device mesh and one placement per mesh dimension.
`dtensor_layout` turns them into the trace format's `global_shape`, `ranges` and `placements`
on the capture's mesh (ttrace.mesh.Mesh), following DTensor's own rules:

- mesh dimensions shard left to right; a `Shard(d)` splits what the dimensions before it
  left of tensor dimension `d` as `torch.chunk` does: pieces of ceil(n / k), so the last
  pieces may be shorter or empty;
- `_StridedShard(d, split_factor=f)` (FSDP2 over a tensor-parallel weight) first splits into
  `f` pieces, splits each piece into `k`, and takes its part of every piece;
- `Partial(op)` is written as `Partial(op)`: the checker sums `Partial(sum)` pieces and
  names any other reduction as one it does not support.

The derivation is checked on every tensor: the shape it gives must be the local tensor's."""

from .placement import Layout


def is_dtensor(tensor):
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return False
    return isinstance(tensor, DTensor)


def local_values(tensor, name=""):
    """What this rank holds of DTensor `tensor`, as the trace stores it: its local tensor,
    except that a vocabulary-parallel embedding's output (a `_MaskPartial`) keeps the rows of
    tokens outside this rank's vocabulary shard until its reduction zeroes them; the summand
    is the local tensor with them zeroed."""
    from torch.distributed.tensor.placement_types import _MaskPartial

    local = tensor.to_local().detach()
    masks = [p for p in tensor.placements if isinstance(p, _MaskPartial)]
    if not masks:
        return local
    local = local.clone()
    for p in masks:
        mask = p.mask_buffer.data
        if mask is None:
            raise ValueError(f"{name}: a _MaskPartial DTensor whose mask is gone: its values "
                             "are not the summands of its Partial(sum)")
        if local.ndim == mask.ndim:
            local[mask] = 0
        else:
            local[mask, :] = 0
    return local


def placement_text(placement):
    """The trace format's text of one DTensor placement."""
    from torch.distributed.tensor.placement_types import Shard, _StridedShard

    if isinstance(placement, _StridedShard):
        return f"_StridedShard(dim={placement.dim}, sf={int(placement.split_factor)})"
    if isinstance(placement, Shard):
        return f"Shard({placement.dim})"
    if placement.is_partial():
        return f"Partial({placement.reduce_op})"
    if placement.is_replicate():
        return "Replicate"
    raise ValueError(f"unknown DTensor placement {placement!r}")


def chunk(intervals, index, parts):
    """Part `index` of `parts` of the positions `intervals` (a list of (start, stop) global
    ranges, concatenated), split as torch.chunk splits: ceil(n / parts) each, the last ones
    shorter or empty."""
    n = sum(stop - start for start, stop in intervals)
    size = -(-n // parts)
    first = min(n, index * size)
    return _take(intervals, first, min(n, first + size))


def strided_chunk(intervals, index, parts, split_factor):
    """Part `index` of `parts` of each of `split_factor` chunks of `intervals`, concatenated:
    the positions a `_StridedShard` keeps."""
    out = []
    for piece in range(split_factor):
        out += chunk(chunk(intervals, piece, split_factor), index, parts)
    return _merged(out)


def _take(intervals, first, stop):
    """Positions first..stop-1 of the concatenated intervals."""
    out, offset = [], 0
    for start, end in intervals:
        lo, hi = max(first - offset, 0), min(stop - offset, end - start)
        if lo < hi:
            out.append((start + lo, start + hi))
        offset += end - start
    return _merged(out)


def _merged(intervals):
    out = []
    for start, stop in intervals:
        if out and out[-1][1] == start:
            out[-1] = (out[-1][0], stop)
        else:
            out.append((start, stop))
    return out


def mesh_axes_of(device_mesh, mesh):
    """The capture's mesh axes the dimensions of `device_mesh` (a DeviceMesh holding this
    rank) run over, all together."""
    return [axis for axes in _axes_per_dimension(device_mesh, mesh) for axis in axes]


def _axes_per_dimension(device_mesh, mesh, name=""):
    """Per dimension of `device_mesh`, the capture's mesh axes it runs over: the line of ranks
    through this rank along that dimension, matched to `mesh`."""
    coord = device_mesh.get_coordinate()
    ranks = device_mesh.mesh.cpu()
    out = []
    for dim in range(device_mesh.ndim):
        line = ranks[tuple(slice(None) if d == dim else c for d, c in enumerate(coord))]
        try:
            out.append(mesh.axes_along(line.reshape(-1).tolist()))
        except ValueError as e:
            raise ValueError(f"{name}: DTensor mesh dimension {_dim_name(device_mesh, dim)}: "
                             f"{e}") from None
    return out


def dtensor_layout(tensor, mesh, rank, outer=None, name=""):
    """Layout of this rank's local shard of DTensor `tensor` on the capture's `mesh`.

    The DTensor's mesh must be the capture's mesh or a submesh of it (each of its dimensions
    whole axes of the capture's mesh). The capture's axes it does not cover hold different
    DTensors: `outer` (axis -> placement text, e.g. {"dp": "Shard(0)"} for activations of a
    tensor-parallel DTensor under data parallelism) says how they split the tensor, outermost
    first; an axis it leaves out holds no placement (a pipeline stage) and even splits are
    required there. `name` names the tensor in errors."""
    device_mesh = tensor.device_mesh
    coord = device_mesh.get_coordinate()
    if coord is None:
        raise ValueError(f"{name}: rank {rank} is not on the DTensor's mesh {device_mesh}")
    placements = {}
    along = _axes_per_dimension(device_mesh, mesh, name)  # per DTensor mesh dimension
    for dim, axes in enumerate(along):
        taken = [a for a in axes if a in placements]
        if taken:
            raise ValueError(f"{name}: mesh axes {taken} appear in two DTensor mesh dimensions")
        text = placement_text(tensor.placements[dim])
        placements.update({a: text for a in axes})

    shape = list(tensor.shape)
    intervals = [[(0, n)] for n in shape]
    # The capture's axes outside the DTensor's mesh split the tensor first: each of their
    # coordinates holds a whole DTensor.
    my_coords = dict(zip(mesh.axes, mesh.coords(rank)))
    for axis, size in zip(mesh.axes, mesh.shape):
        spec = (outer or {}).get(axis)
        if axis in placements or spec is None or size == 1:
            continue
        placements[axis] = spec
        if spec.startswith("Shard("):
            d = int(spec[len("Shard("):-1]) % len(shape)
            shape[d] *= size
            intervals[d] = [(start + my_coords[axis] * (shape[d] // size),
                             stop + my_coords[axis] * (shape[d] // size))
                            for start, stop in intervals[d]]
    # then the DTensor's own mesh dimensions, left to right
    from torch.distributed.tensor.placement_types import Shard, _StridedShard

    for dim, p in enumerate(tensor.placements):
        if not isinstance(p, (Shard, _StridedShard)) or not along[dim]:
            continue
        d = p.dim % len(shape)
        parts = device_mesh.size(dim)
        if isinstance(p, _StridedShard):
            intervals[d] = strided_chunk(intervals[d], coord[dim], parts, int(p.split_factor))
        else:
            intervals[d] = chunk(intervals[d], coord[dim], parts)

    local = tuple(tensor.to_local().shape)
    derived = tuple(sum(b - a for a, b in dim) for dim in intervals)
    if derived != local:
        raise ValueError(
            f"{name}: the DTensor's local shard has shape {list(local)}, but its placements "
            f"{[placement_text(p) for p in tensor.placements]} on mesh {device_mesh} give "
            f"{list(derived)} (a DTensor made by from_local with uneven shards?); pass this "
            "tensor's layout with the capture's `placements`")
    whole = all(dim == [(0, n)] for dim, n in zip(intervals, shape))
    ranges = None if whole else [list(dim) for dim in intervals]
    return Layout(tuple(shape), ranges, placements)


def _dim_name(device_mesh, dim):
    names = device_mesh.mesh_dim_names
    return repr(names[dim]) if names else str(dim)
