#!/usr/bin/env python3
"""Injects a controlled relative error into a copy of a trace set: the values of one shard (the
piece of a tensor a rank holds) or of one block of elements of one logical tensor are
multiplied by (1 + delta), as a bug that scales them would.

The source folder is never written: the trace set is copied to a new folder first, and only
the copy's rank files are opened for writing. Each changed value is re-encoded in the dataset's
own stored type (trace-format.md): fp32 as is, bf16 and fp16 words rounded to nearest even,
fp8 bytes rounded to nearest with their scale_inv (or per-block scales) unchanged and the
value saturated at the format's largest finite number. A delta below the storage resolution
(half a unit in the last place of the stored values, relative: 2^-9 to 2^-8 for bf16, 2^-5 to
2^-4 for fp8 e4m3) rounds away in part or in full; `Injection.applied` is the relative change
actually stored.

The error is systematic (every selected element scaled by the same factor), the simplest model
of a wrong scale, a missing term or a stale value; it is the worst case for a Frobenius-norm
test only in that it cannot cancel, and the relative error of the whole tensor is delta times
the selected part's share of the tensor's norm.

Copies: a shard that several ranks hold (data-parallel replicas, tensor-parallel copies of a
replicated tensor, Partial(sum) summands of one box) is changed on every copy by default, as a
bug in the shard's computation would change it. With `copies="one"` only the chosen rank's
copy changes: ttrace's bitwise replica check then flags the tensor at any delta that changes a
stored value.

    inject.py SRC DST --name layers.0.mlp.fc1 --kind forward_output --iteration 0 \\
        --micro-batch 0 --delta 1e-3 [--rank 1 | --block 0:2,:,4:8] [--one-copy]
"""

import argparse
import json
import math
import os
import shutil
from dataclasses import dataclass, field

import h5py
import numpy as np

from ttrace.writer import encode, expand_scales

KINDS = ("forward_input", "forward_output", "output_grad", "input_grad", "param", "param_grad",
         "main_grad", "updated_param")
# half the relative spacing of stored values at the top of a binade: a delta below it leaves
# every stored value unchanged
RESOLUTION = {"fp32": 2.0 ** -25, "fp16": 2.0 ** -12, "bf16": 2.0 ** -9, "fp8_e4m3": 2.0 ** -5,
              "fp8_e5m2": 2.0 ** -4}
FP8_MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}


@dataclass(frozen=True)
class Key:
    """A logical tensor's identity (trace-format.md)."""
    name: str
    kind: str
    index: int
    iteration: int
    micro_batch: int

    def text(self):
        mb = "" if self.micro_batch < 0 else f" mb{self.micro_batch}"
        return f"{self.name} {self.kind}[{self.index}] it{self.iteration}{mb}"


@dataclass(frozen=True)
class Piece:
    """One dataset of a trace set: where it is and which box of its tensor it holds."""
    rank: int
    file: str
    dataset: str
    ranges: str  # canonical JSON of the ranges attribute; "" when it covers the whole tensor
    dtype: str
    global_shape: tuple


@dataclass
class Injection:
    """Scale one shard or block of tensor `key` by (1 + delta). `rank`: the shard the rank
    holds (default: the lowest rank holding the tensor); `block`: global slices instead (a
    tuple of (start, stop) per dimension, None for the whole dimension); `copies`: "all"
    copies of that shard or "one" (the chosen rank's)."""
    key: Key
    delta: float
    rank: int = None
    block: tuple = None
    copies: str = "all"
    # filled by inject(): the pieces changed, the stored dtype(s) and the relative change of
    # the selected elements as stored (||new - old|| / ||old||, over every changed piece)
    pieces: list = field(default_factory=list)
    dtypes: set = field(default_factory=set)
    applied: float = None


def _canonical_ranges(attrs):
    raw = attrs.get("ranges")
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        raw = raw.decode()
    return json.dumps(json.loads(raw), separators=(",", ":"))


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def index_trace(folder):
    """{Key: [Piece, ...]} of every dataset of the trace set in `folder`, pieces by rank."""
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    pieces = {}
    for entry in manifest["ranks"]:
        with h5py.File(os.path.join(folder, entry["file"]), "r") as h5:
            for name, ds in h5["tensors"].items():
                a = ds.attrs
                key = Key(_text(a["name"]), _text(a["kind"]), int(a["index"]),
                          int(a["iteration"]), int(a["micro_batch"]))
                shape = tuple(int(x) for x in a["global_shape"]) if "global_shape" in a \
                    else tuple(ds.shape)
                pieces.setdefault(key, []).append(Piece(entry["rank"], entry["file"], name,
                                                        _canonical_ranges(a), _text(a["dtype"]),
                                                        shape))
    for key in pieces:
        pieces[key].sort(key=lambda p: p.rank)
    return pieces


def targets(pieces, injection):
    """The pieces of `injection.key` it changes."""
    found = pieces.get(injection.key)
    if not found:
        raise KeyError(f"no tensor {injection.key.text()} in the trace set")
    if injection.block is not None:
        chosen = found if injection.copies == "all" else [
            p for p in found if p.rank == (found[0].rank if injection.rank is None
                                           else injection.rank)]
        return chosen
    rank = found[0].rank if injection.rank is None else injection.rank
    own = [p for p in found if p.rank == rank]
    if not own:
        raise KeyError(f"rank {rank} holds no piece of {injection.key.text()}")
    if injection.copies == "one":
        return own[:1]
    return [p for p in found if p.ranges == own[0].ranges]


def _global_indices(ranges, shape):
    """Per dimension, the global index of each local position (the ranges enumerate them)."""
    if not ranges:
        return [np.arange(n) for n in shape]
    return [np.concatenate([np.arange(a, b) for a, b in dim]) for dim in json.loads(ranges)]


def _decode(stored, dtype):
    """Stored values -> float64 in the fp8 value domain (scale_inv is left aside)."""
    if dtype == "fp32":
        return stored.astype(np.float64)
    if dtype == "fp16":
        return stored.view(np.float16).astype(np.float64)
    if dtype == "bf16":
        return (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype in FP8_MAX:
        import torch
        fp8 = torch.float8_e4m3fn if dtype == "fp8_e4m3" else torch.float8_e5m2
        return torch.from_numpy(stored.copy()).view(fp8).double().numpy()
    raise ValueError(f"unsupported stored dtype {dtype}")


def _scale_of(h5, dataset, shape):
    """Per element scale_inv of an fp8 dataset (1 for the others): only to weigh `applied`."""
    ds = h5["tensors"][dataset]
    if "scale_inv" in ds.attrs:
        return float(ds.attrs["scale_inv"])
    if "scale_block" in ds.attrs:
        block = [int(b) for b in ds.attrs["scale_block"]]
        return expand_scales(h5["scale_inv"][dataset][...], block, shape)
    return 1.0


def _apply(h5, piece, injection):
    """Scales the selected elements of one piece in the open file; returns (||new-old||^2,
    ||old||^2) in decoded values."""
    ds = h5["tensors"][piece.dataset]
    stored = ds[...]
    mask = np.ones(stored.shape, dtype=bool)
    if injection.block is not None:
        index = _global_indices(piece.ranges, stored.shape)
        for d, bounds in enumerate(injection.block):
            if bounds is None:
                continue
            inside = (index[d] >= bounds[0]) & (index[d] < bounds[1])
            shape = [1] * stored.ndim
            shape[d] = -1
            mask &= inside.reshape(shape)
        if not mask.any():
            return 0.0, 0.0
    old = _decode(stored, piece.dtype)
    new_stored = stored.copy()
    # the capture's own encoder: round to nearest even, fp8 saturated, in the fp8 value
    # domain (the dataset's scale_inv stays as it is)
    new_stored[mask] = encode(old[mask] * (1.0 + injection.delta), piece.dtype)
    ds[...] = new_stored
    scale = _scale_of(h5, piece.dataset, stored.shape)
    new = _decode(new_stored, piece.dtype)
    diff = ((new - old) * scale)[mask]
    base = (old * scale)[mask]
    return float(np.sum(diff * diff)), float(np.sum(base * base))


def copy_trace(src, dst):
    """A fresh copy of trace folder `src` at `dst` (which must not exist or be `src`)."""
    if os.path.abspath(src) == os.path.abspath(dst):
        raise ValueError("the injected copy must be another folder than the source")
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)


def inject(src, dst, injections, pieces=None):
    """Copies trace set `src` to `dst` and applies `injections` there (several tensors at
    once; one injection per tensor). `pieces`: index_trace(src), when the caller has it.
    Fills each injection's pieces, dtypes and applied; returns the injections."""
    pieces = pieces if pieces is not None else index_trace(src)
    seen = set()
    by_file = {}
    for inj in injections:
        if inj.key in seen:
            raise ValueError(f"two injections into {inj.key.text()}")
        seen.add(inj.key)
        inj.pieces = targets(pieces, inj)
        inj.dtypes = {p.dtype for p in inj.pieces}
        for p in inj.pieces:
            by_file.setdefault(p.file, []).append((p, inj))
    copy_trace(src, dst)
    sums = {id(inj): [0.0, 0.0] for inj in injections}
    for file, todo in by_file.items():
        with h5py.File(os.path.join(dst, file), "r+") as h5:
            for piece, inj in todo:
                diff, base = _apply(h5, piece, inj)
                sums[id(inj)][0] += diff
                sums[id(inj)][1] += base
    for inj in injections:
        diff, base = sums[id(inj)]
        inj.applied = math.sqrt(diff / base) if base > 0 else (0.0 if diff == 0 else math.inf)
    return injections


def parse_block(text):
    """"0:2,:,4:8" -> ((0, 2), None, (4, 8))."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if part in (":", ""):
            out.append(None)
            continue
        start, stop = part.split(":")
        out.append((int(start), int(stop)))
    return tuple(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("src", help="a clean trace folder (read only)")
    ap.add_argument("dst", help="the new trace folder (replaced if it exists)")
    ap.add_argument("--name", required=True)
    ap.add_argument("--kind", required=True, choices=KINDS)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--iteration", type=int, default=0)
    ap.add_argument("--micro-batch", type=int, default=None,
                    help="default 0 for module tensors, -1 for parameter kinds")
    ap.add_argument("--delta", type=float, required=True, help="relative error: values x (1+delta)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--rank", type=int, help="the shard this rank holds (default: the lowest)")
    where.add_argument("--block", type=parse_block,
                       help="global slices, e.g. 0:2,:,4:8 (every piece holding them)")
    ap.add_argument("--one-copy", action="store_true",
                    help="change only the rank's copy of a replicated shard")
    args = ap.parse_args(argv)
    mb = args.micro_batch
    if mb is None:
        mb = -1 if args.kind in ("param", "param_grad", "main_grad", "updated_param") else 0
    inj = Injection(Key(args.name, args.kind, args.index, args.iteration, mb), args.delta,
                    rank=args.rank, block=args.block, copies="one" if args.one_copy else "all")
    inject(args.src, args.dst, [inj])
    print(f"{inj.key.text()}: x (1 + {args.delta:g}) in {len(inj.pieces)} piece(s) on ranks "
          f"{sorted({p.rank for p in inj.pieces})} ({', '.join(sorted(inj.dtypes))}); stored "
          f"relative change {inj.applied:.4g}")


if __name__ == "__main__":
    main()
