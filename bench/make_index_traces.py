#!/usr/bin/env python3
"""Writes a trace set with many small tensors, for timing how fast its index opens.

make_index_traces.py OUT [--ranks 8] [--tensors 10000] [--role ROLE] [--whole]: a tp-sharded
distributed set of tiny fp32 tensors spread evenly over the ranks (OUT is replaced). With
--role reference it is a reference laid out the same way; with --whole, a single-device
reference holding the same tensors whole (what a laid-out one is measured against)."""

import argparse
import shutil

import numpy as np

from ttrace import TraceWriter


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--tensors", type=int, default=10000)
    parser.add_argument("--role", default="distributed",
                        choices=("distributed", "reference", "perturbed-reference"))
    parser.add_argument("--whole", action="store_true",
                        help="one rank holding every tensor whole (a single-device reference)")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    ranks = args.ranks
    per_rank = args.tensors // ranks
    kinds = ("forward_input", "forward_output", "output_grad", "input_grad")
    if args.whole:
        writer = TraceWriter(args.out, role=args.role, world_size=1,
                             model={"name": "index-bench", "num_layers": per_rank // 4})
        whole = np.zeros((4, 4 * ranks), dtype=np.float32)
        for i in range(per_rank):
            layer, kind = divmod(i, 4)
            writer.add(0, f"layers.{layer}.fc", kinds[kind], whole, layer=layer)
        writer.close()
        return
    writer = TraceWriter(
        args.out,
        role=args.role,
        world_size=ranks,
        parallel={"tp": ranks},
        mesh_axes=["tp"],
        mesh_shape=[ranks],
        rank_coords={r: [r] for r in range(ranks)},
        model={"name": "index-bench", "num_layers": per_rank // 4},
    )
    local = np.zeros((4, 4), dtype=np.float32)
    for rank in range(ranks):
        for i in range(per_rank):
            layer, kind = divmod(i, 4)
            writer.add(rank, f"layers.{layer}.fc", kinds[kind],
                       local, layer=layer, global_shape=(4, 4 * ranks),
                       ranges=[[(0, 4)], [(4 * rank, 4 * rank + 4)]], placements={"tp": "Shard(1)"})
    writer.close()


if __name__ == "__main__":
    main()
