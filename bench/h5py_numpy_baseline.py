#!/usr/bin/env python3
"""Baseline for the comparison benchmark: plain h5py + numpy.

Usage: h5py_numpy_baseline.py DIST REF [--per-tensor]

For every logical tensor (name, kind, index, iteration, micro_batch) of DIST it computes the
relative Frobenius error ||D - R||_F / ||R||_F against REF, placing each shard by its
`ranges` attribute: the squared error of every shard against its slice of the reference is
summed, which equals assembling the whole tensor first. Of several replicas (identical ranges)
the first is used and the others are not read. Partial(sum) pieces are not supported.
Prints one JSON line: tensors, bytes read (stored bytes of all datasets read), seconds, GB/s,
the largest error, and with --per-tensor every error."""

import argparse
import json
import resource
import os
import time

import h5py
import numpy as np


def decode(ds):
    """float64 values of a dataset, and the number of stored bytes read."""
    stored = ds[...]
    dtype = ds.attrs["dtype"]
    if dtype == "fp32":
        values = stored
    elif dtype == "bf16":
        values = (stored.astype(np.uint32) << 16).view(np.float32)
    elif dtype == "fp16":
        values = stored.view(np.float16)
    else:
        raise SystemExit(f"{ds.file.filename}:{ds.name}: dtype {dtype} is not supported by the baseline")
    return values.astype(np.float64), stored.nbytes


def identity(ds):
    a = ds.attrs
    return (a["name"], a["kind"], int(a["index"]), int(a["iteration"]), int(a["micro_batch"]))


def datasets(folder):
    """(file, dataset path, identity, attrs) of every dataset of a trace folder."""
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    for entry in manifest["ranks"]:
        path = os.path.join(folder, entry["file"])
        with h5py.File(path, "r") as f:
            for ds in f["tensors"].values():
                yield path, ds.name, identity(ds), dict(ds.attrs)


def index_of(ranges):
    """numpy index of a shard's ranges: plain slices when each dimension has one range."""
    if all(len(dim) == 1 for dim in ranges):
        return tuple(slice(dim[0][0], dim[0][1]) for dim in ranges)
    return np.ix_(*[np.concatenate([np.arange(a, b) for a, b in dim]) for dim in ranges])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist")
    parser.add_argument("ref")
    parser.add_argument("--per-tensor", action="store_true", help="include every tensor's error")
    args = parser.parse_args()

    start = time.perf_counter()
    ref_location = {key: (path, name) for path, name, key, _ in datasets(args.ref)}
    pieces = {}
    for path, name, key, attrs in datasets(args.dist):
        if "Partial(sum)" in attrs.get("placements", ""):
            raise SystemExit(f"{path}:{name}: Partial(sum) is not supported by the baseline")
        ranges = json.loads(attrs["ranges"]) if "ranges" in attrs else None
        pieces.setdefault(key, {}).setdefault(json.dumps(ranges), (path, name, ranges))

    files = {}

    def dataset(path, name):
        if path not in files:
            files[path] = h5py.File(path, "r")
        return files[path][name]

    bytes_read = 0
    errors = {}
    for key, shards in pieces.items():
        if key not in ref_location:
            raise SystemExit(f"{key} is not in the reference")
        reference, n = decode(dataset(*ref_location[key]))
        bytes_read += n
        squared = 0.0
        for path, name, ranges in shards.values():
            values, n = decode(dataset(path, name))
            bytes_read += n
            diff = (values - (reference if ranges is None else reference[index_of(ranges)])).ravel()
            squared += float(np.dot(diff, diff))
        flat = reference.ravel()
        norm = float(np.sqrt(np.dot(flat, flat)))
        if norm:
            errors["/".join(map(str, key))] = float(np.sqrt(squared)) / norm
        else:
            errors["/".join(map(str, key))] = 0.0 if squared == 0 else float("inf")
    for f in files.values():
        f.close()
    seconds = time.perf_counter() - start

    result = {
        "tool": "h5py+numpy",
        "tensors": len(errors),
        "bytes_read": bytes_read,
        "seconds": round(seconds, 4),
        "gb_per_s": round(bytes_read / seconds / 1e9, 4),
        "max_rel_error": max(errors.values(), default=0.0),
        # ru_maxrss is in KiB on Linux
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if args.per_tensor:
        result["rel_errors"] = errors
    print(json.dumps(result))


if __name__ == "__main__":
    main()
