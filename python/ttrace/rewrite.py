"""Input rewriting: module inputs replaced by the reference's, sliced to this rank's shard.

A distributed run whose hooked modules take the reference trace's `forward_input` values
instead of what the run computed checks every module in isolation: a faulty module no longer
spoils the inputs of the modules after it, so each faulty module shows (docs/capture.md)."""

import json
import os

import h5py
import numpy as np
import torch

from .writer import _fp8_table, expand_scales, unpack_fp4


class _StraightThrough(torch.autograd.Function):
    """Forward: the reference's values; backward: the gradient passes to the computed input
    unchanged, so the modules before still get their gradients (gradients are not rewritten)."""

    @staticmethod
    def forward(ctx, computed, reference):
        return reference.clone()  # a new tensor: autograd attaches its graph to the output

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def select(source, ranges):
    """The elements of `source` (a dataset or an array of its shape) at a shard's `ranges`."""
    if ranges is None:
        return source[()]
    if any(not dim for dim in ranges):  # an empty shard
        return np.zeros([sum(b - a for a, b in dim) for dim in ranges], source.dtype)
    # read the bounding box of the ranges, then keep the ranges inside it
    box = tuple(slice(min(a for a, _ in dim), max(b for _, b in dim)) for dim in ranges)
    values = source[box]
    picks = [np.concatenate([np.arange(a, b) for a, b in dim]) - s.start
             for dim, s in zip(ranges, box)]
    return values[np.ix_(*picks)]


def _elements(ds):
    """What select() takes of dataset `ds`: the dataset itself, but for fp4, whose bytes hold
    two elements each, its unscaled values."""
    return unpack_fp4(ds[()]) if ds.attrs.get("dtype") == "fp4_e2m1" else ds


def _scale_inv(ds, ranges):
    """The scale_inv of an fp8 or fp4 dataset's elements at `ranges`: one number per tensor,
    else an array, times the tensor_scale_inv above the blocks where there is one
    (trace-format.md)."""
    if "scale_block" not in ds.attrs:
        return float(ds.attrs.get("scale_inv", 1.0))
    scales = ds.file["scale_inv"][ds.name.rsplit("/", 1)[1]][()]
    shape = ds.shape
    if ds.attrs["dtype"] == "fp4_e2m1":  # two elements a byte along the last dimension
        shape = shape[:-1] + (2 * shape[-1],)
    per_element = select(expand_scales(scales, ds.attrs["scale_block"], shape), ranges)
    return per_element * float(ds.attrs.get("tensor_scale_inv", 1.0))


def _decode(ds, values, ranges):
    """Float64 values of the elements `values` of dataset `ds` at `ranges`, stored in trace
    dtype attr `dtype`."""
    dtype = ds.attrs["dtype"]
    if dtype == "fp32":
        return values.astype(np.float64)
    if dtype == "bf16":
        return (values.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "fp16":
        return values.view(np.float16).astype(np.float64)
    if dtype in ("fp8_e4m3", "fp8_e5m2"):
        return _fp8_table(dtype)[values] * _scale_inv(ds, ranges)
    if dtype == "fp4_e2m1":  # `values` are unpacked already (_elements)
        return values * _scale_inv(ds, ranges)
    raise ValueError(f"unknown trace dtype {dtype!r}")


def open_reference(folder):
    """The rank files of reference trace folder `folder`, opened read-only, after checking its
    manifest: a single-device reference or perturbed reference."""
    path = os.path.join(folder, "manifest.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the reference manifest: {e}") from e
    if manifest.get("role") not in ("reference", "perturbed-reference"):
        raise ValueError(f"{path}: role {manifest.get('role')!r} is not a reference")
    if manifest.get("world_size") != 1:
        raise ValueError(f"{path}: a reference has world_size 1, "
                         f"not {manifest.get('world_size')}")
    return [h5py.File(os.path.join(folder, entry["file"]), "r") for entry in manifest["ranks"]]


class ReferenceDatasets:
    """The datasets of group `group` of a reference trace folder, indexed once by
    identity(attrs) (None leaves a dataset out); the files are opened read-only."""

    def __init__(self, folder, group, identity):
        self.folder = folder
        self._group = group
        self._files = open_reference(folder)
        self._index = {}  # identity -> (file, dataset name)
        for f in self._files:
            for key, ds in f.get(group, {}).items():
                ident = identity(ds.attrs)
                if ident is not None:
                    self._index[ident] = (f, key)

    def __len__(self):
        return len(self._index)

    def sliced(self, ident, layout, shape, what):
        """(dataset, its values at `layout`'s ranges) of the dataset `ident`, whose global
        shape must be `layout`'s and whose slice must have `shape`; None when the reference
        has none. `what` names it in errors."""
        found = self._index.get(ident)
        if found is None:
            return None
        f, key = found
        ds = f[self._group][key]
        where = f"{f.filename} dataset /{self._group}/{key} ({what})"
        stored = tuple(int(n) for n in ds.attrs["global_shape"])
        if stored != tuple(layout.global_shape):
            raise ValueError(f"{where}: reference shape {stored} is not this run's global "
                             f"shape {tuple(layout.global_shape)}")
        values = select(_elements(ds), layout.ranges)
        if values.shape != tuple(shape):
            raise ValueError(f"{where}: the slice of shape {values.shape} for this rank's ranges "
                             f"is not this run's shape {tuple(shape)}")
        return ds, values

    def close(self):
        for f in self._files:
            f.close()
        self._files.clear()


class ReferenceInputs(ReferenceDatasets):
    """The `forward_input` tensors of a reference trace folder, by (global name, index,
    iteration, micro-batch)."""

    def __init__(self, folder):
        super().__init__(folder, "tensors", lambda a: (
            str(a["name"]), int(a["index"]), int(a["iteration"]), int(a["micro_batch"]))
            if a["kind"] == "forward_input" else None)

    def shard(self, name, index, iteration, micro_batch, layout, like):
        """The reference's input `index` of module `name` at (iteration, micro_batch), sliced to
        `layout` (the shard's global shape and ranges) as a tensor of `like`'s dtype and
        device; None when the reference did not record it."""
        found = self.sliced((name, index, iteration, micro_batch), layout, like.shape,
                            f"{name} forward_input {index}")
        if found is None:
            return None
        ds, values = found
        out = torch.from_numpy(_decode(ds, values, layout.ranges)).to(dtype=like.dtype, device=like.device)
        return _StraightThrough.apply(like, out) if like.requires_grad else out
