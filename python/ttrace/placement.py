"""Where a local shard sits in the global tensor: global shape, index ranges, DTensor placements.

A `Layout` is what the trace format stores per dataset (`global_shape`, `ranges`,
`placements`). `even_layout` derives it from a placement spec for the common case of even,
contiguous (or Megatron-strided) shards, using the rank's mesh coordinates."""

import re
from dataclasses import dataclass

_SHARD = re.compile(r"^Shard\((-?\d+)\)$")


@dataclass
class Layout:
    """global_shape: tuple of ints; ranges: per dimension a list of (start, stop) pairs, or
    None when the shard is the whole tensor; placements: dict mesh axis -> placement string."""

    global_shape: tuple
    ranges: list = None
    placements: dict = None


def zigzag_ranges(length, index, size):
    """The (start, stop) ranges of part `index` of `size` of a sequence of `length` split
    zig-zag, as load-balanced context parallelism does with a causal mask: 2 * size equal
    chunks, part i holding chunks i and 2 * size - 1 - i."""
    return _zigzag([(0, length)], index, size)


def _zigzag(intervals, index, size):
    out = []
    for start, stop in intervals:
        length = stop - start
        if length % (2 * size):
            raise ValueError(f"length {length} does not split into 2 x {size} zig-zag chunks")
        chunk = length // (2 * size)
        for c in (index, 2 * size - 1 - index):
            out.append((start + c * chunk, start + (c + 1) * chunk))
    return out


def _split(intervals, index, size, stride):
    """The part `index` of `size` of every one of `stride` equal chunks of each interval."""
    out = []
    for start, stop in intervals:
        length = stop - start
        if length % (size * stride):
            raise ValueError(f"length {length} does not split into {stride} x {size} parts")
        chunk = length // stride
        part = chunk // size
        for c in range(stride):
            lo = start + c * chunk + index * part
            out.append((lo, lo + part))
    return out


def even_layout(local_shape, spec, mesh, coords, strides=None, zigzag=()):
    """Layout of a shard of shape `local_shape`.

    spec: dict mesh axis -> "Shard(d)" (d may be negative), "Replicate", "Partial(sum)" or None
      (the tensor does not exist on the other coordinates of that axis: no placement written).
      Axes of `mesh` missing from spec are Replicate, except `pp` (a stage owns its layers) and
      axes of size 1, which are left out.
    mesh: dict axis -> size, in mesh order; coords: this rank's coordinate per axis (same order).
    strides: dict axis -> partition stride of a Shard (Megatron fused weights), default 1.
    zigzag: axes whose Shard is split zig-zag (context parallelism, see zigzag_ranges).
    Shards of one dimension by several axes nest in mesh order (outer axis first)."""
    ndim = len(local_shape)
    strides = strides or {}
    placements = {}
    shards = {}  # dim -> [(axis, index, size, stride)] in mesh order
    for (axis, size), coord in zip(mesh.items(), coords):
        p = spec.get(axis, "Replicate" if axis != "pp" else None)
        if p is None or size == 1:
            continue
        m = _SHARD.match(p)
        if m:
            d = int(m.group(1))
            d = d + ndim if d < 0 else d
            if not 0 <= d < ndim:
                raise ValueError(f"{p} on axis {axis} for a tensor of {ndim} dimensions")
            stride = "zigzag" if axis in zigzag else strides.get(axis, 1)
            shards.setdefault(d, []).append((axis, coord, size, stride))
            p = f"Shard({d})"
        elif p not in ("Replicate", "Partial(sum)"):
            raise ValueError(f"unknown placement {p!r} on axis {axis}")
        placements[axis] = p
    global_shape = list(local_shape)
    ranges = None
    if shards:
        ranges = [[(0, n)] for n in local_shape]
        for d, axes in shards.items():
            for _, _, size, _ in axes:
                global_shape[d] *= size
            intervals = [(0, global_shape[d])]
            for _, index, size, stride in axes:
                if stride == "zigzag":
                    intervals = _zigzag(intervals, index, size)
                else:
                    intervals = _split(intervals, index, size, stride)
            ranges[d] = intervals
    return Layout(tuple(global_shape), ranges, placements)
