#!/usr/bin/env python3
"""Writes the fixture trace sets catalogued in tests/data/FIXTURES.md.

Usage: make_fixtures.py OUT

Every case goes to OUT/<case>/{dist,ref,pert}, the bad inputs to OUT/bad/<name> and
OUT/bad/ref. Each OUT/<case> folder written is removed first, so reruns are clean.
Deterministic: every random draw comes from a seed derived from the case name."""

import json
import os
import re
import shutil
import sys
import zlib

import h5py
import numpy as np

from ttrace.writer import PARAM_KINDS, TraceWriter, encode

# unit round-off of each case dtype: the relative size of the perturbation
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "bf16": 2.0**-8}


def quantize(values, dtype):
    """The float64 values that a trace of `dtype` stores for `values`."""
    values = np.asarray(values, dtype=np.float64)
    if dtype == "fp32":
        return values.astype(np.float32).astype(np.float64)
    bits = encode(values, "bf16").astype(np.uint32) << 16
    return bits.view(np.float32).astype(np.float64)


def seed_of(name):
    return zlib.crc32(name.encode())


def take(array, ranges):
    """The local shard of `array` described by per-dimension lists of [start, stop) ranges."""
    index = [np.concatenate([np.arange(a, b) for a, b in dim]) for dim in ranges]
    return array[np.ix_(*index)]


class Piece:
    """What one rank holds of a logical tensor: its ranges (None = whole), placements, and
    data when it is not a slice of the global tensor (Partial(sum))."""

    def __init__(self, ranges, placements, data=None):
        self.ranges = ranges
        self.placements = placements
        self.data = data


class Tensor:
    def __init__(self, name, kind, exact, ref, layout, iteration, micro_batch):
        self.name = name
        self.kind = kind
        self.exact = exact  # the value before rounding to the case dtype
        self.ref = ref
        self.layout = layout
        self.iteration = iteration
        self.micro_batch = -1 if kind in PARAM_KINDS else micro_batch
        layer = re.search(r"layers\.(\d+)", name)
        expert = re.search(r"experts\.(\d+)", name)
        self.layer = int(layer.group(1)) if layer else -1
        self.expert = int(expert.group(1)) if expert else -1

    def key(self):
        return (self.name, self.kind, self.iteration, self.micro_batch)


class Case:
    """One fixture: its mesh, and its logical tensors in global execution order.

    Each rank writes the pieces it holds in that same order, which is its own execution
    order (forward in module order, backward reversed, then parameter gradients)."""

    def __init__(
        self,
        name,
        axes=(),
        shape=(),
        parallel=None,
        dtype="fp32",
        num_layers=1,
        iterations=(0,),
        micro_batches=1,
        dist_noise=0.0,
        seed=None,
    ):
        self.name = name
        self.axes = list(axes)
        self.shape = list(shape)
        self.parallel = parallel or {}
        self.dtype = dtype
        self.num_layers = num_layers
        self.iterations = list(iterations)
        self.micro_batches = micro_batches
        self.dist_noise = dist_noise
        self.seed = seed_of(name) if seed is None else seed
        self.rng = np.random.default_rng(self.seed)
        self.world_size = int(np.prod(self.shape)) if self.shape else 1
        self.tensors = []
        # hooks for the bug cases: global (dist values of a whole logical tensor) and per rank
        self.bug_global = None
        self.bug_rank = None

    def coords(self, rank):
        return dict(zip(self.axes, np.unravel_index(rank, self.shape))) if self.axes else {}

    def add(self, name, kind, ref, layout, iteration=0, micro_batch=0):
        exact = np.asarray(ref, dtype=np.float64)
        t = Tensor(name, kind, exact, quantize(exact, self.dtype), layout, iteration, micro_batch)
        self.tensors.append(t)
        return t.ref

    def find(self, name, kind, iteration=0, micro_batch=0):
        key = (name, kind, iteration, -1 if kind in PARAM_KINDS else micro_batch)
        return next(t for t in self.tensors if t.key() == key)

    def placed(self, global_shape, shard=None, replicate=(), owner=None, partial=None):
        """A layout: rank -> Piece or None.

        shard: {axis: dim} splits dim evenly over the axis, or {axis: (dim, coord -> ranges)}
        for several ranges per rank; replicate: axes with a full copy; owner: {axis: coord}
        where only that coordinate holds the tensor (pipeline stage, expert owner), no
        placement is written for such axes; partial: (axis, rank -> data) for Partial(sum)."""
        shard = shard or {}
        order = {a: i for i, a in enumerate(self.axes)}

        def piece(rank):
            coords = self.coords(rank)
            if owner and any(coords[a] != c for a, c in owner.items()):
                return None
            ranges = [[(0, n)] for n in global_shape]
            placements = {}
            for axis, spec in shard.items():
                if isinstance(spec, tuple):
                    dim, ranges_of = spec
                    ranges[dim] = ranges_of(coords[axis])
                else:
                    dim = spec
                    step = global_shape[dim] // self.shape[order[axis]]
                    ranges[dim] = [(coords[axis] * step, (coords[axis] + 1) * step)]
                placements[axis] = f"Shard({dim})"
            for axis in replicate:
                placements[axis] = "Replicate"
            data = None
            if partial:
                axis, data_of = partial
                placements[axis] = "Partial(sum)"
                data = data_of(rank)
            placements = dict(sorted(placements.items(), key=lambda kv: order[kv[0]]))
            return Piece(ranges if shard else None, placements, data)

        return piece

    def _common(self):
        return {
            "dtype": {"recipe": self.dtype, "compute": self.dtype},
            "model": {"name": f"fixture-{self.name}", "num_layers": self.num_layers},
            "capture": {"iterations": self.iterations, "micro_batches": self.micro_batches},
        }

    def _add(self, writer, rank, t, values, piece=None):
        writer.add(
            rank,
            t.name,
            t.kind,
            values,
            dtype=self.dtype,
            iteration=t.iteration,
            micro_batch=t.micro_batch,
            layer=t.layer,
            expert=t.expert,
            global_shape=t.ref.shape,
            ranges=piece.ranges if piece else None,
            placements=piece.placements if piece else None,
        )

    def write_reference(self, folder, perturbed=False, skip=()):
        u = UNIT_ROUNDOFF[self.dtype]
        pert_seed = self.seed + 1
        rng = np.random.default_rng(pert_seed)
        extra = {}
        if perturbed:
            extra = {"role": "perturbed-reference", "perturbation": {"relative": u, "seed": pert_seed}}
        with TraceWriter(folder, **extra, **self._common()) as w:
            for t in self.tensors:
                if t.key() in skip:
                    continue
                values = t.ref
                if perturbed:
                    values = quantize(t.ref * (1 + u * rng.uniform(-1, 1, t.ref.shape)), self.dtype)
                self._add(w, 0, t, values)

    def write_distributed(self, folder):
        rng = np.random.default_rng(self.seed + 2)
        with TraceWriter(
            folder,
            role="distributed",
            world_size=self.world_size,
            parallel=self.parallel,
            mesh_axes=self.axes,
            mesh_shape=self.shape,
            rank_coords={r: [int(c) for c in self.coords(r).values()] for r in range(self.world_size)},
            **self._common(),
        ) as w:
            for t in self.tensors:
                # noise and global bugs act on the whole tensor, so replicas stay bitwise equal.
                # Noise goes on the unrounded value: noise below half an ulp added to the
                # rounded reference would round straight back to it.
                values = t.ref
                if self.dist_noise:
                    values = t.exact * (1 + self.dist_noise * rng.uniform(-1, 1, t.ref.shape))
                if self.bug_global:
                    values = self.bug_global(t, values.copy())
                values = quantize(values, self.dtype)
                for rank in range(self.world_size):
                    piece = t.layout(rank)
                    if piece is None:
                        continue
                    data = piece.data if piece.data is not None else values
                    if piece.ranges is not None:
                        data = take(data, piece.ranges)
                    if self.bug_rank:
                        data = self.bug_rank(rank, t, data.copy())
                    self._add(w, rank, t, data, piece)

    def write(self, out):
        root = os.path.join(out, self.name)
        shutil.rmtree(root, ignore_errors=True)
        self.write_distributed(os.path.join(root, "dist"))
        self.write_reference(os.path.join(root, "ref"))
        self.write_reference(os.path.join(root, "pert"), perturbed=True)


# ---------------------------------------------------------------- layout cases


def tp_column():
    c = Case("tp_column", ["tp"], [2], {"tp": 2})
    n = c.rng.standard_normal
    rep = c.placed([4, 8], replicate=["tp"])
    c.add("layers.0.fc1", "forward_input", n((4, 8)), rep)
    c.add("layers.0.fc1.weight", "param", n((16, 8)), c.placed([16, 8], shard={"tp": 0}))
    c.add("layers.0.fc1", "forward_output", n((4, 16)), c.placed([4, 16], shard={"tp": 1}))
    c.add("layers.0.fc1", "output_grad", n((4, 16)), c.placed([4, 16], shard={"tp": 1}))
    c.add("layers.0.fc1", "input_grad", n((4, 8)), rep)
    c.add("layers.0.fc1.weight", "param_grad", n((16, 8)), c.placed([16, 8], shard={"tp": 0}))
    return c


def tp_row():
    c = Case("tp_row", ["tp"], [2], {"tp": 2})
    # small integers: the fp32 sum of the two partial products is exact
    x = c.add("layers.0.fc2", "forward_input", c.rng.integers(-3, 4, (4, 16)), c.placed([4, 16], shard={"tp": 1}))
    w = c.add("layers.0.fc2.weight", "param", c.rng.integers(-3, 4, (8, 16)), c.placed([8, 16], shard={"tp": 1}))
    partials = [x[:, 8 * r : 8 * r + 8] @ w[:, 8 * r : 8 * r + 8].T for r in range(2)]
    c.add("layers.0.fc2", "forward_output", partials[0] + partials[1], c.placed([4, 8], partial=("tp", lambda r: partials[r])))
    c.add("layers.0.fc2.bias", "param", c.rng.standard_normal(8), c.placed([8], replicate=["tp"]))
    return c


def tp_strided():
    c = Case("tp_strided", ["tp"], [2], {"tp": 2})
    # fused q, k, v blocks of 8 rows, each split over tp: partition stride 3
    rows = (0, lambda r: [(4 * r, 4 * r + 4), (8 + 4 * r, 12 + 4 * r), (16 + 4 * r, 20 + 4 * r)])
    c.add("layers.0.qkv.weight", "param", c.rng.standard_normal((24, 8)), c.placed([24, 8], shard={"tp": rows}))
    return c


def sp():
    c = Case("sp", ["tp"], [2], {"tp": 2, "sp": True})
    n = c.rng.standard_normal
    c.add("layers.0.norm", "forward_output", n((8, 2, 8)), c.placed([8, 2, 8], shard={"tp": 0}))
    c.add("layers.0.norm.weight", "param", n(8), c.placed([8], replicate=["tp"]))
    c.add("layers.0.norm.weight", "param_grad", n(8), c.placed([8], replicate=["tp"]))
    return c


def cp_zigzag():
    c = Case("cp_zigzag", ["cp"], [2], {"cp": 2})
    # 4 chunks of 4 along the sequence: rank r holds chunks r and 3 - r
    seq = (1, lambda r: [(4 * r, 4 * r + 4), (12 - 4 * r, 16 - 4 * r)])
    layout = c.placed([2, 16, 8], shard={"cp": seq})
    c.add("layers.0.attn", "forward_output", c.rng.standard_normal((2, 16, 8)), layout)
    c.add("layers.0.attn", "input_grad", c.rng.standard_normal((2, 16, 8)), layout)
    return c


def pp_vpp():
    c = Case("pp_vpp", ["pp"], [2], {"pp": 2, "vpp": 2}, num_layers=4)
    # interleaved virtual stages: layer l lives on stage l % 2
    for layer in range(4):
        c.add(f"layers.{layer}.mlp", "forward_output", c.rng.standard_normal((4, 8)), c.placed([4, 8], owner={"pp": layer % 2}))
    for layer in reversed(range(4)):
        c.add(f"layers.{layer}.mlp", "input_grad", c.rng.standard_normal((4, 8)), c.placed([4, 8], owner={"pp": layer % 2}))
    return c


def dp_microbatch(name="dp_microbatch"):
    c = Case(name, ["dp"], [2], {"dp": 2}, micro_batches=2, seed=seed_of("dp_microbatch"))
    for mb in range(2):
        c.add("layers.0.mlp", "forward_output", c.rng.standard_normal((4, 8)), c.placed([4, 8], shard={"dp": 0}), micro_batch=mb)
    c.add("layers.0.mlp.weight", "param_grad", c.rng.standard_normal((8, 8)), c.placed([8, 8], replicate=["dp"]))
    return c


def ep():
    c = Case("ep", ["ep"], [2], {"ep": 2})
    for e in range(4):
        owner = {"ep": e // 2}
        c.add(f"layers.0.mlp.experts.{e}.fc1", "forward_output", c.rng.standard_normal((3, 8)), c.placed([3, 8], owner=owner))
        c.add(f"layers.0.mlp.experts.{e}.fc1.weight", "param", c.rng.standard_normal((8, 8)), c.placed([8, 8], owner=owner))
    c.add("layers.0.mlp.router.weight", "param", c.rng.standard_normal((4, 8)), c.placed([4, 8], replicate=["ep"]))
    return c


COMBINED_SHAPE = (8, 32, 64)  # batch rows per micro-batch, hidden, ffn


def combined(name="combined"):
    """pp=2 x dp=2 x tp=2, bf16: two layers of a column-parallel fc1 and a row-parallel fc2.

    The reference is a consistent bf16 computation (y = h W2^T, h = x W1^T, gradients and an
    SGD step), so the bug cascade of bug_shard can be derived from it."""
    c = Case(
        name,
        ["pp", "dp", "tp"],
        [2, 2, 2],
        {"pp": 2, "dp": 2, "tp": 2},
        dtype="bf16",
        num_layers=2,
        iterations=(0, 1),
        micro_batches=2,
        dist_noise=2.0**-9,
        seed=seed_of("combined"),
    )
    q = lambda x: quantize(x, "bf16")  # noqa: E731
    n = c.rng.standard_normal
    # big enough that the error of a clean tensor, a few hundred bf16 roundings, stays close
    # to its perturbed-reference error
    rows, hidden, ffn, lr = COMBINED_SHAPE + (0.01,)

    def act(layer, cols, tp_dim):
        # activations: batch rows sharded over dp; columns sharded over tp or replicated
        if tp_dim is None:
            return c.placed([rows, cols], shard={"dp": 0}, replicate=["tp"], owner={"pp": layer})
        return c.placed([rows, cols], shard={"dp": 0, "tp": tp_dim}, owner={"pp": layer})

    def weight(layer, shape, tp_dim):
        return c.placed(shape, shard={"tp": tp_dim}, replicate=["dp"], owner={"pp": layer})

    w1 = [q(n((ffn, hidden)) / np.sqrt(hidden)) for _ in range(2)]
    w2 = [q(n((hidden, ffn)) / np.sqrt(ffn)) for _ in range(2)]
    for it in range(2):
        for layer in range(2):
            c.add(f"layers.{layer}.fc1.weight", "param", w1[layer], weight(layer, [ffn, hidden], 0), it)
            c.add(f"layers.{layer}.fc2.weight", "param", w2[layer], weight(layer, [hidden, ffn], 1), it)
        g1 = [np.zeros_like(w) for w in w1]
        g2 = [np.zeros_like(w) for w in w2]
        for mb in range(2):
            x = q(n((rows, hidden)))
            saved = []
            for layer in range(2):
                fc1, fc2 = f"layers.{layer}.fc1", f"layers.{layer}.fc2"
                c.add(fc1, "forward_input", x, act(layer, hidden, None), it, mb)
                h = c.add(fc1, "forward_output", x @ w1[layer].T, act(layer, ffn, 1), it, mb)
                c.add(fc2, "forward_input", h, act(layer, ffn, 1), it, mb)
                saved.append((x, h))
                x = c.add(fc2, "forward_output", h @ w2[layer].T, act(layer, hidden, None), it, mb)
            g = q(n((rows, hidden)))
            for layer in reversed(range(2)):
                fc1, fc2 = f"layers.{layer}.fc1", f"layers.{layer}.fc2"
                x, h = saved[layer]
                c.add(fc2, "output_grad", g, act(layer, hidden, None), it, mb)
                gh = c.add(fc2, "input_grad", g @ w2[layer], act(layer, ffn, 1), it, mb)
                g2[layer] += g.T @ h
                c.add(fc1, "output_grad", gh, act(layer, ffn, 1), it, mb)
                g = c.add(fc1, "input_grad", gh @ w1[layer], act(layer, hidden, None), it, mb)
                g1[layer] += gh.T @ x
        for layer in range(2):
            g1[layer] = c.add(f"layers.{layer}.fc1.weight", "param_grad", g1[layer], weight(layer, [ffn, hidden], 0), it)
            g2[layer] = c.add(f"layers.{layer}.fc2.weight", "param_grad", g2[layer], weight(layer, [hidden, ffn], 1), it)
        for layer in range(2):
            w1[layer] = c.add(f"layers.{layer}.fc1.weight", "updated_param", w1[layer] - lr * g1[layer], weight(layer, [ffn, hidden], 0), it)
            w2[layer] = c.add(f"layers.{layer}.fc2.weight", "updated_param", w2[layer] - lr * g2[layer], weight(layer, [hidden, ffn], 1), it)
    return c


# ---------------------------------------------------------------- bug cases


BUG_FACTOR_MINUS_ONE = 0.25


def bug_shard():
    """combined, but rank 5 (pp=1, dp=0, tp=1) computes its shard of layers.1.fc1's output
    (iteration 0, micro-batch 1) 25% too large; the error flows into fc2 on that stage.
    25% on a quarter of the tensor is ~16 bf16 epsilons of relative error: the size of the
    real Megatron-LM bugs (8-300 eps), well clear of round-off."""
    c = combined("bug_shard")
    batch, _, ffn = COMBINED_SHAPE
    rows, cols = slice(0, batch // 2), slice(ffn // 2, ffn)  # rank 5: dp 0 -> first rows, tp 1 -> last cols
    h = c.find("layers.1.fc1", "forward_output", 0, 1).ref
    w2 = c.find("layers.1.fc2.weight", "param", 0).ref
    # fc2's all-reduced output changes by fc2 of the extra 25% on rank 5's columns
    shift = BUG_FACTOR_MINUS_ONE * h[rows, cols] @ w2[:, cols].T

    def bug(t, values):
        if (t.iteration, t.micro_batch) != (0, 1):
            return values
        if (t.name, t.kind) in (("layers.1.fc1", "forward_output"), ("layers.1.fc2", "forward_input")):
            values[rows, cols] *= 1 + BUG_FACTOR_MINUS_ONE
        elif (t.name, t.kind) == ("layers.1.fc2", "forward_output"):
            values[rows, :] += shift
        return values

    c.bug_global = bug
    return c


def bug_replica():
    """dp_microbatch, but rank 1's copy of the reduced weight gradient differs at [0,0]."""
    c = dp_microbatch("bug_replica")

    def bug(rank, t, data):
        if rank == 1 and (t.name, t.kind) == ("layers.0.mlp.weight", "param_grad"):
            data[0, 0] *= 1.5
        return data

    c.bug_rank = bug
    return c


# ---------------------------------------------------------------- bad inputs


def find_dataset(path, name, kind):
    """(open file, dataset) of the dataset with attributes name/kind in rank file `path`."""
    f = h5py.File(path, "r+")
    for ds in f["tensors"].values():
        if ds.attrs["name"] == name and ds.attrs["kind"] == kind:
            return f, ds
    raise KeyError((path, name, kind))


def rewrite_dataset(path, name, kind, data, **attrs):
    """Replaces a dataset's storage by `data`, keeping its attributes except `attrs`."""
    f, ds = find_dataset(path, name, kind)
    with f:
        key, saved = ds.name, dict(ds.attrs)
        del f[key]
        new = f.create_dataset(key, data=data)
        saved.update(attrs)
        for k, v in saved.items():
            new.attrs[k] = v


def edit_manifest(folder, edit):
    path = os.path.join(folder, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    edit(manifest)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=2)


def write_bad(out, clean):
    """The broken trace folders of FIXTURES.md, all but one derived from `clean` (tp_column)."""
    root = os.path.join(out, "bad")
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(seed_of("bad"))
    clean.write_reference(os.path.join(root, "ref"))
    fc1 = "layers.0.fc1"
    ref_out = clean.find(fc1, "forward_output").ref
    ref_w = clean.find("layers.0.fc1.weight", "param").ref

    def derive(name):
        folder = os.path.join(root, name)
        shutil.copytree(os.path.join(out, clean.name, "dist"), folder)
        return folder, os.path.join(folder, "rank00000.h5"), os.path.join(folder, "rank00001.h5")

    folder, r0, r1 = derive("missing_rank")
    os.remove(r1)

    folder, r0, r1 = derive("extra_rank")
    # rank 2 has a well-formed file, so only the manifest's rank list is wrong
    shutil.copy(r1, os.path.join(folder, "rank00002.h5"))
    with h5py.File(os.path.join(folder, "rank00002.h5"), "r+") as f:
        f.attrs["rank"] = 2
    edit_manifest(folder, lambda m: m["ranks"].append({"rank": 2, "file": "rank00002.h5", "coords": [2]}))

    folder, r0, r1 = derive("rank_mismatch")
    with h5py.File(r1, "r+") as f:
        f.attrs["rank"] = 0

    folder, r0, r1 = derive("gap")
    rewrite_dataset(r1, fc1, "forward_output", ref_out[:, 9:16].astype(np.float32), ranges=json.dumps([[[0, 4]], [[9, 16]]]))

    folder, r0, r1 = derive("overlap")
    rewrite_dataset(r1, "layers.0.fc1.weight", "param", ref_w[6:14].astype(np.float32), ranges=json.dumps([[[6, 14]], [[0, 8]]]))

    folder, r0, r1 = derive("shape_mismatch")
    rewrite_dataset(r1, fc1, "forward_output", ref_out[:, 8:14].astype(np.float32))

    folder, r0, r1 = derive("truncated")
    size = os.path.getsize(r1)
    with open(r1, "r+b") as f:
        f.truncate(size // 2)

    folder, r0, r1 = derive("corrupt")
    size = os.path.getsize(r1)
    with open(r1, "wb") as f:
        f.write(rng.integers(0, 256, size, dtype=np.uint8).tobytes())

    folder, r0, r1 = derive("newer_version")
    edit_manifest(folder, lambda m: m.update(format_version="2.0"))

    folder, r0, r1 = derive("manifest_syntax")
    path = os.path.join(folder, "manifest.json")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text[: len(text) // 2])  # cut mid-document: an unterminated object

    folder, r0, r1 = derive("no_manifest")
    os.remove(os.path.join(folder, "manifest.json"))

    folder, r0, r1 = derive("dtype_storage")
    f, ds = find_dataset(r0, fc1, "forward_output")
    with f:
        ds.attrs["dtype"] = "bf16"  # the storage stays 32-bit float

    folder, r0, r1 = derive("missing_attr")
    f, ds = find_dataset(r0, "layers.0.fc1.weight", "param")
    with f:
        del ds.attrs["kind"]
    f, ds = find_dataset(r1, fc1, "forward_output")
    with f:
        ds.attrs["ranges"] = "[[0,4"

    folder, r0, r1 = derive("nan")
    for path, index, value in ((r0, (1, 2), np.nan), (r1, (0, 0), np.inf)):
        f, ds = find_dataset(path, fc1, "forward_output")
        with f:
            data = ds[...]
            data[index] = value
            ds[...] = data

    # One NaN in the distributed run and one in the reference, at different places: equal
    # counts must not pass for equal tensors.
    folder, r0, r1 = derive("nan_moved")
    f, ds = find_dataset(r0, fc1, "forward_output")
    with f:
        data = ds[...]
        data[1, 2] = np.nan
        ds[...] = data
    ref_nan = os.path.join(root, "ref_nan")
    shutil.copytree(os.path.join(root, "ref"), ref_nan)
    f, ds = find_dataset(os.path.join(ref_nan, "rank00000.h5"), fc1, "forward_output")
    with f:
        data = ds[...]
        data[2, 2] = np.nan
        ds[...] = data

    # A manifest claiming two billion ranks must be refused quickly, not enumerated.
    folder, r0, r1 = derive("huge_world")
    edit_manifest(folder, lambda m: m.update(world_size=2000000000))

    folder, r0, r1 = derive("dtype_mixed")
    rewrite_dataset(r1, fc1, "forward_output", encode(ref_out[:, 8:16], "bf16"), dtype="bf16")

    clean.write_reference(os.path.join(root, "ref_missing_tensor"), skip=[("layers.0.fc1.weight", "param_grad", 0, -1)])

    # a reference whose fc1 output was computed in bf16: another dtype than the distributed run's
    folder = os.path.join(root, "ref_dtype")
    shutil.copytree(os.path.join(root, "ref"), folder)
    rewrite_dataset(os.path.join(folder, "rank00000.h5"), fc1, "forward_output",
                    encode(ref_out, "bf16"), dtype="bf16")

    # A rank file holding one tensor twice (a forward recomputed under activation
    # checkpointing and captured again): the distributed run's rank 0, and the reference's.
    def capture_again(path, name, kind):
        f, ds = find_dataset(path, name, kind)
        with f:
            seq = 1 + max(int(d.attrs["seq"]) for d in f["tensors"].values())
            f.copy(ds, f"tensors/{seq:06d}")
            f["tensors"][f"{seq:06d}"].attrs["seq"] = seq

    folder, r0, r1 = derive("duplicate")
    capture_again(r0, fc1, "forward_output")
    folder = os.path.join(root, "ref_duplicate")
    shutil.copytree(os.path.join(root, "ref"), folder)
    capture_again(os.path.join(folder, "rank00000.h5"), fc1, "forward_output")

    # combined's second pipeline stage captured nothing: a stage that never ran
    folder = os.path.join(root, "stage_missing")
    shutil.copytree(os.path.join(out, "combined", "dist"), folder)
    for rank in range(4, 8):
        with h5py.File(os.path.join(folder, f"rank{rank:05d}.h5"), "r+") as f:
            for name in list(f["tensors"]):
                del f["tensors"][name]


def write_hdf5_crashers(out):
    """bad/hdf5_NAME: the bundled clean sample with one rank file damaged as hdf5_crashers.json
    says, in ways that crash, abort or hang libhdf5 (or that the indexer once missed); checked
    against the sample's reference."""
    here = os.path.dirname(os.path.abspath(__file__))
    sample = os.path.join(here, "..", "..", "resources", "samples", "clean", "dist")
    with open(os.path.join(here, "hdf5_crashers.json")) as f:
        catalogue = json.load(f)
    for case in catalogue["cases"]:
        folder = os.path.join(out, "bad", "hdf5_" + case["name"])
        shutil.copytree(sample, folder)
        path = os.path.join(folder, case["rank_file"])
        with open(path, "r+b") as f:
            for offset, before, after in case["bytes"]:
                f.seek(offset)
                found = f.read(1)[0]
                if found != before:
                    sys.exit(f"{path}: byte {offset} is {found}, not {before}: the bundled sample "
                             "changed; find new crashers (issue 15) for hdf5_crashers.json")
                f.seek(offset)
                f.write(bytes([after]))


CASES = (tp_column, tp_row, tp_strided, sp, cp_zigzag, pp_vpp, dp_microbatch, ep, combined, bug_shard, bug_replica)


def main(argv):
    if len(argv) != 2:
        sys.exit(f"usage: {argv[0]} OUT")
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    cases = {}
    for make in CASES:
        case = make()
        case.write(out)
        cases[case.name] = case
    write_bad(out, cases["tp_column"])
    write_hdf5_crashers(out)


if __name__ == "__main__":
    main(sys.argv)
