#!/usr/bin/env python3
"""Writes a large synthetic trace set: the shape and layout of a real TP x PP x DP job.

make_synthetic_traces.py OUT [--tp 8] [--pp 8] [--dp 4] [--tensors-per-rank 16] [--width 4]
                         [--bug LAYER]

writes OUT/dist (tp*pp*dp ranks, one HDF5 file each, Megatron's rank order: tp fastest, then
dp, then pp), OUT/ref and OUT/pert (single-device reference and perturbed reference), all in
trace format v1 through the capture package's writer. Tensors are small (a few hundred
elements; --width sets the hidden columns per tp rank) so that hundreds of ranks take
seconds. Each pipeline stage owns its layers; per
layer it captures a column-parallel output (Shard on tp and on the dp batch), a row-parallel
output (Replicate on tp), the input gradient of the row-parallel module, and the column-
parallel weight's gradient (Shard on tp, Replicate on dp). Every shard is a slice of one
global tensor that depends only on the tensor's name, so the distributed run equals the
reference up to nothing; --bug LAYER scales the row-parallel output of that layer on the
ranks of tp coordinate 0 by 1.01, a silent bug that diverges the tp replicas. OUT is
replaced."""

import argparse
import concurrent.futures
import os
import shutil
import zlib

import numpy as np

from ttrace import TraceWriter

BATCH = 2  # samples per data-parallel rank and micro-batch


def global_values(name, kind, shape):
    """The whole tensor, a function of its identity only (consistent tensor generation)."""
    seed = zlib.crc32(f"{name}/{kind}".encode())
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def layer_tensors(layer, tp, dp, width):
    """(name, kind, global shape, {axis: placement}, tp dim, dp dim) of one layer, in
    execution order: forward, backward, then the parameter gradient."""
    act = (BATCH * dp, width * tp)
    return [
        (f"layers.{layer}.mlp.fc1", "forward_output", act, {"tp": "Shard(1)", "dp": "Shard(0)"}, 1, 0),
        (f"layers.{layer}.mlp.fc2", "forward_output", act, {"tp": "Replicate", "dp": "Shard(0)"}, None, 0),
        (f"layers.{layer}.mlp.fc2", "input_grad", act, {"tp": "Shard(1)", "dp": "Shard(0)"}, 1, 0),
        (f"layers.{layer}.mlp.fc1.weight", "param_grad", (width * tp, width),
         {"tp": "Shard(0)", "dp": "Replicate"}, 0, None),
    ]


def execution_order(layers, tp, dp, width):
    """Every logical tensor in the order a single device runs them: forward by layer, backward
    in reverse, then the parameter gradients."""
    per_layer = {layer: layer_tensors(layer, tp, dp, width) for layer in range(layers)}
    forward = [t for layer in range(layers) for t in per_layer[layer][:2]]
    backward = [per_layer[layer][2] for layer in reversed(range(layers))]
    grads = [per_layer[layer][3] for layer in range(layers)]
    return forward + backward + grads


def shard_slice(shape, dim, index, parts):
    """Global [start, stop) per dimension of piece `index` of `parts` along `dim`."""
    ranges = [(0, n) for n in shape]
    if dim is not None:
        size = shape[dim] // parts
        ranges[dim] = (index * size, (index + 1) * size)
    return ranges


def distributed_writer(out, tp, pp, dp, layers, write_manifest):
    world = tp * pp * dp
    coords = {r: [r // (tp * dp), (r // tp) % dp, r % tp] for r in range(world)}
    return TraceWriter(
        out, role="distributed", world_size=world,
        parallel={"tp": tp, "pp": pp, "dp": dp},
        mesh_axes=["pp", "dp", "tp"], mesh_shape=[pp, dp, tp], rank_coords=coords,
        model={"name": "synthetic-tp-pp-dp", "num_layers": layers},
        write_manifest=write_manifest,
    ), coords


def write_ranks(out, tp, pp, dp, layers_per_stage, width, bug, ranks):
    """Writes the rank files of `ranks` (one worker process's part)."""
    layers = pp * layers_per_stage
    writer, coords = distributed_writer(out, tp, pp, dp, layers, write_manifest=False)
    order = execution_order(layers, tp, dp, width)
    values = {(name, kind): global_values(name, kind, shape) for name, kind, shape, *_ in order}
    for rank in ranks:
        stage, d, t = coords[rank]
        owned = range(stage * layers_per_stage, (stage + 1) * layers_per_stage)
        for name, kind, shape, placements, tp_dim, dp_dim in order:
            layer = int(name.split(".")[1])
            if layer not in owned:
                continue
            ranges = shard_slice(shape, tp_dim, t, tp)
            if dp_dim is not None:
                ranges[dp_dim] = shard_slice(shape, dp_dim, d, dp)[dp_dim]
            local = values[(name, kind)][tuple(slice(a, b) for a, b in ranges)]
            if bug == layer and kind == "forward_output" and name.endswith("fc2") and t == 0:
                local = local * np.float32(1.01)
            writer.add(rank, name, kind, local, layer=layer, global_shape=shape,
                       ranges=[[r] for r in ranges], placements=placements)
        writer.finish_rank(rank)  # thousands of open files would hold gigabytes
    writer.close()


def write_distributed(out, tp, pp, dp, layers_per_stage, width, bug):
    """Rank files on every core (h5py's attribute writes dominate), then the manifest."""
    world = tp * pp * dp
    layers = pp * layers_per_stage
    workers = min(os.cpu_count() or 1, world)
    parts = [range(w, world, workers) for w in range(workers)]
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        jobs = [pool.submit(write_ranks, out, tp, pp, dp, layers_per_stage, width, bug, part)
                for part in parts]
        for job in jobs:
            job.result()
    distributed_writer(out, tp, pp, dp, layers, write_manifest=True)[0].close()
    order = execution_order(layers, tp, dp, width)
    values = {(name, kind): global_values(name, kind, shape) for name, kind, shape, *_ in order}
    return order, values, layers


def write_reference(out, role, order, values, layers, noise):
    writer = TraceWriter(out, role=role, model={"name": "synthetic-tp-pp-dp", "num_layers": layers},
                         perturbation={"relative": noise, "seed": 1} if noise else None)
    rng = np.random.default_rng(7)
    for name, kind, shape, *_ in order:
        whole = values[(name, kind)]
        if noise:
            whole = whole * (1 + noise * rng.standard_normal(shape)).astype(np.float32)
        writer.add(0, name, kind, whole, layer=int(name.split(".")[1]))
    writer.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--pp", type=int, default=8)
    parser.add_argument("--dp", type=int, default=4)
    parser.add_argument("--tensors-per-rank", type=int, default=16,
                        help="rounded up to a multiple of 4 (the tensors of one layer)")
    parser.add_argument("--width", type=int, default=4, help="hidden columns per tp rank")
    parser.add_argument("--bug", type=int, default=None, metavar="LAYER")
    args = parser.parse_args()
    for name in ("tp", "pp", "dp", "tensors_per_rank", "width"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    layers_per_stage = -(-args.tensors_per_rank // 4)
    shutil.rmtree(args.out, ignore_errors=True)
    order, values, layers = write_distributed(os.path.join(args.out, "dist"), args.tp, args.pp,
                                              args.dp, layers_per_stage, args.width, args.bug)
    write_reference(os.path.join(args.out, "ref"), "reference", order, values, layers, 0.0)
    write_reference(os.path.join(args.out, "pert"), "perturbed-reference", order, values, layers,
                    2.0 ** -24)


if __name__ == "__main__":
    main()
