#!/usr/bin/env python3
"""Writes a trace set with many small tensors, for timing how fast its index opens.

make_index_traces.py OUT [--ranks 8] [--tensors 10000]: a tp-sharded distributed set of
tiny fp32 tensors spread evenly over the ranks (OUT is replaced)."""

import argparse
import shutil

import numpy as np

from ttrace import TraceWriter


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--tensors", type=int, default=10000)
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    ranks = args.ranks
    per_rank = args.tensors // ranks
    writer = TraceWriter(
        args.out,
        role="distributed",
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
            writer.add(rank, f"layers.{layer}.fc", ("forward_input", "forward_output", "output_grad", "input_grad")[kind],
                       local, layer=layer, global_shape=(4, 4 * ranks),
                       ranges=[[(0, 4)], [(4 * rank, 4 * rank + 4)]], placements={"tp": "Shard(1)"})
    writer.close()


if __name__ == "__main__":
    main()
