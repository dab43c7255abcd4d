#!/usr/bin/env python3
"""Writes a large synthetic trace set for benchmarks: OUT/dist, OUT/ref, OUT/pert and OUT/ref-tp8.

Usage: make_bench_traces.py OUT [--gb 2] [--rows 2048] [--hidden 4096] [--seed 0]

The distributed side is tp=4 x dp=2 (mesh axes dp, tp; world size 8). Every layer has two
logical tensors of [rows, hidden]: `layers.{l}.mlp.fc1` forward_output in fp32 and
`layers.{l}.mlp.fc1` output_grad in bf16, both Shard(0) on dp (batch rows) and Shard(1) on tp,
so every rank holds a distinct box and the distributed trace is as large as the reference.
dist = reference plus round-off-sized noise, pert = reference * (1 + u*r). ref-tp8 is the
reference's values laid out over 8 ranks in another layout than dist's (Shard(1) over 8
column ranges): a reference on several ranks, every block of the comparison assembled from 8
pieces (docs/checker.md, "A reference on several ranks"). The number of layers is chosen so
that dist, ref and pert together hold about --gb gigabytes (ref-tp8 adds ref's size)."""

import argparse
import os
import shutil
import time

import numpy as np

from ttrace.writer import TraceWriter, encode

TP, DP = 4, 2
REF_TP = 8  # ref-tp8's column ranges
# (kind, dtype, relative noise of dist, relative perturbation of pert)
TENSORS = (("forward_output", "fp32", 2.0**-23, 2.0**-24), ("output_grad", "bf16", 2.0**-9, 2.0**-8))
BYTES = {"fp32": 4, "bf16": 2}


def rounded(values, dtype):
    """float32 values as stored in `dtype`."""
    if dtype == "fp32":
        return values
    return (encode(values, "bf16").astype(np.uint32) << 16).view(np.float32)


def noisy(rng, values, relative):
    return values * (1 + relative * rng.uniform(-1, 1, values.shape).astype(np.float32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--gb", type=float, default=2.0, help="approximate total size of dist+ref+pert")
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.rows % DP or args.hidden % TP or args.hidden % REF_TP:
        parser.error(f"--rows must divide by {DP} and --hidden by {TP} and {REF_TP}")

    layer_bytes = 3 * sum(args.rows * args.hidden * BYTES[dtype] for _, dtype, _, _ in TENSORS)
    layers = max(1, round(args.gb * 1e9 / layer_bytes))
    start = time.perf_counter()
    common = {
        "dtype": {"recipe": "bf16", "compute": "bf16", "params": "fp32"},
        "model": {"name": "bench-mlp", "num_layers": layers, "hidden_size": args.hidden},
        "capture": {"iterations": [0], "micro_batches": 1},
    }
    for sub in ("dist", "ref", "pert", "ref-tp8"):
        shutil.rmtree(os.path.join(args.out, sub), ignore_errors=True)
    dist = TraceWriter(
        os.path.join(args.out, "dist"),
        role="distributed",
        world_size=TP * DP,
        parallel={"tp": TP, "dp": DP},
        mesh_axes=["dp", "tp"],
        mesh_shape=[DP, TP],
        rank_coords={r: [r // TP, r % TP] for r in range(TP * DP)},
        **common,
    )
    ref = TraceWriter(os.path.join(args.out, "ref"), **common)
    ref_tp8 = TraceWriter(
        os.path.join(args.out, "ref-tp8"),
        world_size=REF_TP,
        parallel={"tp": REF_TP},
        mesh_axes=["tp"],
        mesh_shape=[REF_TP],
        rank_coords={r: [r] for r in range(REF_TP)},
        **common,
    )
    pert = TraceWriter(
        os.path.join(args.out, "pert"),
        role="perturbed-reference",
        perturbation={"relative": 2.0**-8, "seed": args.seed},
        **common,
    )
    rows, cols = args.rows // DP, args.hidden // TP
    shape = (args.rows, args.hidden)
    for layer in range(layers):
        for t, (kind, dtype, dist_noise, pert_noise) in enumerate(TENSORS):
            rng = np.random.default_rng([args.seed, layer, t])
            exact = rng.standard_normal(shape, dtype=np.float32)
            meta = dict(dtype=dtype, layer=layer, global_shape=shape)
            name = f"layers.{layer}.mlp.fc1"
            reference = rounded(exact, dtype)
            ref.add(0, name, kind, reference, **meta)
            width = args.hidden // REF_TP
            for rank in range(REF_TP):
                columns = (rank * width, (rank + 1) * width)
                ref_tp8.add(rank, name, kind, reference[:, columns[0] : columns[1]],
                            ranges=[[(0, args.rows)], [columns]], placements={"tp": "Shard(1)"},
                            **meta)
            pert.add(0, name, kind, rounded(noisy(rng, reference, pert_noise), dtype), **meta)
            # noise on the unrounded value: below half an ulp it would vanish on the rounded one
            values = rounded(noisy(rng, exact, dist_noise), dtype)
            for rank in range(TP * DP):
                d, c = divmod(rank, TP)
                box = ((d * rows, (d + 1) * rows), (c * cols, (c + 1) * cols))
                dist.add(
                    rank,
                    name,
                    kind,
                    values[box[0][0] : box[0][1], box[1][0] : box[1][1]],
                    ranges=[[box[0]], [box[1]]],
                    placements={"dp": "Shard(0)", "tp": "Shard(1)"},
                    **meta,
                )
    for writer in (dist, ref, pert, ref_tp8):
        writer.close()
    size = sum(
        os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(args.out) for f in files
    )
    print(f"{layers} layers, {2 * layers} logical tensors, {size / 1e9:.2f} GB in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
