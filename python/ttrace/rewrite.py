"""Input rewriting: module inputs replaced by the reference's, sliced to this rank's shard.

A distributed run whose hooked modules take the reference trace's `forward_input` values
instead of what the run computed checks every module in isolation: a faulty module no longer
spoils the inputs of the modules after it, so each faulty module shows (docs/capture.md)."""

import json
import os

import h5py
import numpy as np
import torch

from .writer import _fp8_table, expand_scales


class _StraightThrough(torch.autograd.Function):
    """Forward: the reference's values; backward: the gradient passes to the computed input
    unchanged, so the modules before still get their gradients (gradients are not rewritten)."""

    @staticmethod
    def forward(ctx, computed, reference):
        return reference.clone()  # a new tensor: autograd attaches its graph to the output

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _select(source, ranges):
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


def _scale_inv(ds, ranges):
    """The scale_inv of an fp8 dataset's elements at `ranges`: one number per tensor, else an
    array (trace-format.md)."""
    if "scale_block" not in ds.attrs:
        return float(ds.attrs.get("scale_inv", 1.0))
    scales = ds.file["scale_inv"][ds.name.rsplit("/", 1)[1]][()]
    return _select(expand_scales(scales, ds.attrs["scale_block"], ds.shape), ranges)


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
    raise ValueError(f"unknown trace dtype {dtype!r}")


class ReferenceInputs:
    """The `forward_input` tensors of a reference trace folder, indexed once by
    (global name, index, iteration, micro-batch); the files are opened read-only."""

    def __init__(self, folder):
        self.folder = folder
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
        self._files = []
        self._index = {}  # (name, index, iteration, micro_batch) -> (file, dataset name)
        for entry in manifest["ranks"]:
            f = h5py.File(os.path.join(folder, entry["file"]), "r")
            self._files.append(f)
            for key, ds in f["tensors"].items():
                if ds.attrs["kind"] == "forward_input":
                    ident = (str(ds.attrs["name"]), int(ds.attrs["index"]),
                             int(ds.attrs["iteration"]), int(ds.attrs["micro_batch"]))
                    self._index[ident] = (f, key)

    def __len__(self):
        return len(self._index)

    def shard(self, name, index, iteration, micro_batch, layout, like):
        """The reference's input `index` of module `name` at (iteration, micro_batch), sliced to
        `layout` (the shard's global shape and ranges) as a tensor of `like`'s dtype and
        device; None when the reference did not record it."""
        found = self._index.get((name, index, iteration, micro_batch))
        if found is None:
            return None
        f, key = found
        ds = f["tensors"][key]
        where = f"{f.filename} dataset /tensors/{key} ({name} forward_input {index})"
        if tuple(int(n) for n in ds.attrs["global_shape"]) != tuple(layout.global_shape):
            raise ValueError(f"{where}: reference shape {tuple(ds.attrs['global_shape'])} is "
                             f"not the shard's global shape {tuple(layout.global_shape)}")
        values = _select(ds, layout.ranges)
        if values.shape != tuple(like.shape):
            raise ValueError(f"{where}: the slice of shape {values.shape} for this rank's ranges "
                             f"is not the input's shape {tuple(like.shape)}")
        out = torch.from_numpy(_decode(ds, values, layout.ranges)).to(dtype=like.dtype, device=like.device)
        return _StraightThrough.apply(like, out) if like.requires_grad else out

    def close(self):
        for f in self._files:
            f.close()
        self._files.clear()
