"""DTensor placements read by the capture (ttrace.dtensor): on gloo CPU processes, for every
placement kind, uneven and empty shards, submeshes, flattened meshes, 1-, 2- and 3-D meshes,
and the _StridedShard that FSDP2 over tensor parallelism makes. Every derived layout is checked
against an independent derivation: an index-carrying tensor distributed the same way by torch,
whose local values must be the global indices at the derived ranges."""

import os
import subprocess
import tempfile
import unittest

import h5py
import numpy as np
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.placement_types import _StridedShard

import ttrace
from distributed import run_ranks
from ttrace.dtensor import chunk, dtensor_layout, strided_chunk
from ttrace.mesh import Mesh


def index_tensor(shape):
    """Each element holds its own flat global index (exact in float64)."""
    return torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape)


def values_at(full, layout):
    """The elements of `full` at the layout's ranges, in local order."""
    if layout.ranges is None:
        return full
    picks = [np.concatenate([np.arange(a, b) for a, b in dim] or [np.zeros(0, np.int64)])
             for dim in layout.ranges]
    return full[np.ix_(*picks)]


def assert_layout_holds(dt, full, layout, placements):
    local = dt.to_local().detach().numpy()
    expected = values_at(full.numpy(), layout)
    assert tuple(layout.global_shape) == tuple(full.shape), (layout.global_shape, full.shape)
    assert local.shape == expected.shape, (local.shape, expected.shape, layout)
    assert np.array_equal(local, expected), (local, expected, layout)
    assert layout.placements == placements, (layout.placements, placements)


class ChunkTest(unittest.TestCase):
    """The interval arithmetic against torch.chunk and _StridedShard on index vectors."""

    def test_chunk_is_torch_chunk(self):
        for n in range(0, 11):
            for parts in range(1, 6):
                pieces = list(torch.arange(n).chunk(parts)) if n else []
                pieces += [torch.arange(0)] * (parts - len(pieces))
                for i in range(parts):
                    got = [x for a, b in chunk([(0, n)], i, parts) for x in range(a, b)]
                    self.assertEqual(got, pieces[i].tolist(), (n, parts, i))

    def test_strided_chunk_is_strided_shard(self):
        for n in range(1, 13):
            for parts in range(1, 4):
                for sf in range(1, 4):
                    shards, _ = _StridedShard(0, split_factor=sf)._split_tensor(
                        torch.arange(n), parts, with_padding=False)
                    for i in range(parts):
                        got = [x for a, b in strided_chunk([(0, n)], i, parts, sf)
                               for x in range(a, b)]
                        self.assertEqual(got, shards[i].tolist(), (n, parts, sf, i))

    def test_chunk_of_several_intervals(self):
        self.assertEqual(chunk([(0, 2), (6, 9)], 1, 2), [(7, 9)])
        self.assertEqual(chunk([(0, 2), (6, 9)], 0, 2), [(0, 2), (6, 7)])


# (mesh shape, mesh names, global shape, placements, expected trace placements per rank 0)
CASES_1D = [
    ((4,), ("dp",), (8, 3), [Shard(0)], {"dp": "Shard(0)"}),
    ((4,), ("dp",), (5, 3), [Shard(0)], {"dp": "Shard(0)"}),  # 2, 2, 1, 0 rows
    ((4,), ("dp",), (3, 2), [Shard(0)], {"dp": "Shard(0)"}),  # 1, 1, 1, 0 rows
    ((4,), ("dp",), (2, 6), [Shard(1)], {"dp": "Shard(1)"}),
    ((4,), ("dp",), (2, 6), [Shard(-1)], {"dp": "Shard(1)"}),
    ((4,), ("dp",), (2, 3), [Replicate()], {"dp": "Replicate"}),
]
CASES_2D = [
    ((2, 2), ("dp", "tp"), (6, 5), [Shard(0), Shard(1)], {"dp": "Shard(0)", "tp": "Shard(1)"}),
    ((2, 2), ("dp", "tp"), (7, 2), [Shard(0), Shard(0)], {"dp": "Shard(0)", "tp": "Shard(0)"}),
    ((2, 2), ("dp", "tp"), (3, 4), [Replicate(), Shard(1)], {"dp": "Replicate", "tp": "Shard(1)"}),
    ((2, 2), ("dp", "tp"), (8, 4), [_StridedShard(0, split_factor=2), Shard(0)],
     {"dp": "_StridedShard(dim=0, sf=2)", "tp": "Shard(0)"}),
    ((2, 2), ("dp", "tp"), (9, 4), [_StridedShard(0, split_factor=2), Shard(0)],
     {"dp": "_StridedShard(dim=0, sf=2)", "tp": "Shard(0)"}),
]
CASES_3D = [
    ((2, 2, 2), ("pp", "dp", "tp"), (5, 7), [Shard(0), Shard(1), Shard(0)],
     {"pp": "Shard(0)", "dp": "Shard(1)", "tp": "Shard(0)"}),
    ((2, 2, 2), ("pp", "dp", "tp"), (4, 10), [Replicate(), _StridedShard(1, split_factor=2),
                                             Shard(1)],
     {"pp": "Replicate", "dp": "_StridedShard(dim=1, sf=2)", "tp": "Shard(1)"}),
]


def split_by_torch(full, mesh, placements):
    """The DTensor torch's own placements make of `full` on `mesh`, split locally by each
    placement's `_split_tensor` (distribute_tensor refuses uneven _StridedShard splits)."""
    local = full
    for dim, (p, coord) in enumerate(zip(placements, mesh.get_coordinate())):
        if isinstance(p, (Shard, _StridedShard)):
            local = p._split_tensor(local, mesh.size(dim), with_padding=False)[0][coord]
    return DTensor.from_local(local.contiguous(), mesh, placements, run_check=False,
                              shape=full.shape, stride=full.stride())


def _distributed_index_tensors(rank, world, cases):
    for mesh_shape, names, shape, placements, expected in cases:
        mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
        full = index_tensor(shape)
        even = all(n % int(np.prod(mesh_shape)) == 0 for n in shape)
        strided = any(isinstance(p, _StridedShard) for p in placements)
        # torch's distribute_tensor where it takes the case, torch's own splits elsewhere
        dt = split_by_torch(full, mesh, placements) if strided and not even else \
            distribute_tensor(full, mesh, placements)
        layout = dtensor_layout(dt, Mesh.from_device_mesh(mesh), rank, name=str(placements))
        assert_layout_holds(dt, full, layout, expected)


def _partial_sums(rank, world):
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    full = index_tensor((4, 3))
    coord = mesh.get_coordinate()
    # tp ranks hold summands of their dp shard; the sum over tp is the shard
    summand = full[coord[0] * 2:(coord[0] + 1) * 2] * (0.25 if coord[1] == 0 else 0.75)
    dt = DTensor.from_local(summand, mesh, [Shard(0), Partial()], run_check=False)
    layout = dtensor_layout(dt, Mesh.from_device_mesh(mesh), rank)
    assert layout.placements == {"dp": "Shard(0)", "tp": "Partial(sum)"}, layout.placements
    assert layout.ranges == [[(coord[0] * 2, coord[0] * 2 + 2)], [(0, 3)]], layout.ranges
    gathered = dt.full_tensor()  # torch's own reduction agrees with Partial(sum)
    assert torch.equal(gathered, full), gathered
    avg = DTensor.from_local(summand, mesh, [Shard(0), Partial("avg")], run_check=False)
    assert dtensor_layout(avg, Mesh.from_device_mesh(mesh), rank).placements["tp"] == \
        "Partial(avg)"


def _submeshes(rank, world):
    root = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    mesh = Mesh.from_device_mesh(root)
    dp, tp = root.get_coordinate()
    # a tensor-parallel activation: each dp rank holds its batch rows, split over tp
    full = index_tensor((4, 6))
    mine = full[dp * 2:(dp + 1) * 2]
    dt = distribute_tensor(mine, root["tp"], [Shard(1)])
    layout = dtensor_layout(dt, mesh, rank, outer={"dp": "Shard(0)"})
    assert_layout_holds(dt, full, layout, {"dp": "Shard(0)", "tp": "Shard(1)"})
    # a parameter on the tp submesh is a copy on every dp rank
    weight = index_tensor((6, 2))
    dt = distribute_tensor(weight, root["tp"], [Shard(0)])
    layout = dtensor_layout(dt, mesh, rank, outer={"dp": "Replicate"})
    assert_layout_holds(dt, weight, layout, {"dp": "Replicate", "tp": "Shard(0)"})
    # a flattened mesh runs over both axes: 10 rows over 4 ranks are 3, 3, 3, 1
    flat = root["dp", "tp"]._flatten("dp_tp")
    full = index_tensor((10, 2))
    dt = distribute_tensor(full, flat, [Shard(0)])
    layout = dtensor_layout(dt, mesh, rank)
    assert_layout_holds(dt, full, layout, {"dp": "Shard(0)", "tp": "Shard(0)"})
    assert dt.to_local().shape[0] == (3 if rank < 3 else 1)
    # a mesh that is not whole axes of the capture's mesh is named, not guessed
    other = Mesh(["dp", "tp"], [2, 2], lambda r: [r % 2, r // 2])  # ranks laid out by column
    dt = distribute_tensor(full, flat, [Shard(0)])
    try:
        dtensor_layout(dt, other, rank, name="x")
    except ValueError as e:
        assert "not whole axes" in str(e), e
    else:
        raise AssertionError("a flattened mesh across the capture's axes was accepted")


def _fsdp2_over_tensor_parallel(rank, world):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    root = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = torch.nn.Sequential(torch.nn.Linear(4, 8, bias=False),
                                torch.nn.Linear(8, 6, bias=False)).double()
    full = {"0.weight": index_tensor((8, 4)), "1.weight": index_tensor((6, 8)) + 1000}
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(full[name])
    parallelize_module(model, root["tp"], {"0": ColwiseParallel(), "1": RowwiseParallel()})
    fully_shard(model, mesh=root["dp"])
    mesh = Mesh.from_device_mesh(root)
    seen = {}
    for name, p in model.named_parameters():
        assert isinstance(p, DTensor), (name, type(p))
        layout = dtensor_layout(p, mesh, rank, name=name)
        seen[name] = layout.placements
        assert_layout_holds(p, full[name], layout, layout.placements)
    # FSDP2 shards the column-parallel weight's dim 0 after tp did: a _StridedShard
    assert seen["0.weight"] == {"dp": "_StridedShard(dim=0, sf=2)", "tp": "Shard(0)"}, seen
    assert seen["1.weight"] == {"dp": "Shard(0)", "tp": "Shard(1)"}, seen


class _Averaged(torch.nn.Module):
    """Returns its input as a Partial(avg) DTensor over the tp mesh (1 rank: a plain copy)."""

    def __init__(self, mesh):
        super().__init__()
        self.mesh = mesh

    def forward(self, x):
        if self.mesh is None:
            return x * 1.0
        return DTensor.from_local(x * 1.0, self.mesh, [Partial("avg")], run_check=False)


def _capture_averaged(rank, world, folder):
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",)) if world > 1 else None
    model = torch.nn.Sequential(_Averaged(mesh))
    role = "distributed" if world > 1 else "reference"
    cap = ttrace.Capture(model, folder, role=role, mesh=mesh, iterations=[0])
    with cap.step(0):
        model(index_tensor((2, 3)).float())
    cap.close()


class UnsupportedReductionTest(unittest.TestCase):
    def test_the_checker_names_a_partial_it_cannot_sum(self):
        check = os.environ.get("TTRACE_CHECK")
        if not check:
            self.skipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        with tempfile.TemporaryDirectory() as tmp:
            dist_dir, ref_dir = os.path.join(tmp, "dist"), os.path.join(tmp, "ref")
            run_ranks(2, _capture_averaged, dist_dir)
            _capture_averaged(0, 1, ref_dir)
            with h5py.File(os.path.join(dist_dir, "rank00001.h5")) as f:
                attrs = [dict(ds.attrs) for ds in f["tensors"].values()]
            self.assertTrue(any(a.get("placements") == '{"tp": "Partial(avg)"}' for a in attrs),
                            attrs)
            done = subprocess.run([check, dist_dir, ref_dir, "--no-cache"], capture_output=True,
                                  text=True)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("'Partial(avg)' is a reduction the checker does not support",
                      done.stdout + done.stderr)


def _perturb_dtensors(rank, world):
    """perturb_ on a DTensor whole on this rank (a mixed-precision reference under FSDP2 on one
    rank) changes it as it changes the plain tensor; one held in pieces is refused."""
    mesh = init_device_mesh("cpu", (world,))
    full = ttrace.consistent_randn((8, 4), seed=2)
    if world == 1:
        dt = distribute_tensor(full.clone(), mesh, [Shard(0)])
        ttrace.perturb_(dt, relative=1e-3, seed=7)
        expected = ttrace.perturb_(full.clone(), relative=1e-3, seed=7)
        torch.testing.assert_close(dt.to_local(), expected, rtol=0, atol=0)
        return
    dt = distribute_tensor(full.clone(), mesh, [Shard(0)])
    try:
        ttrace.perturb_(dt, seed=7)
    except ValueError as e:
        assert "perturb the model before sharding it" in str(e), e
    else:
        raise AssertionError("a sharded DTensor was perturbed piece by piece")


class DTensorLayoutTest(unittest.TestCase):
    def test_1d_mesh_even_uneven_empty_and_replicate(self):
        run_ranks(4, _distributed_index_tensors, CASES_1D)

    def test_2d_mesh_nested_and_strided_shards(self):
        run_ranks(4, _distributed_index_tensors, CASES_2D)

    def test_3d_mesh(self):
        run_ranks(8, _distributed_index_tensors, CASES_3D)

    def test_partial_sum_and_unsupported_reductions(self):
        run_ranks(4, _partial_sums)

    def test_submesh_flattened_mesh_and_foreign_mesh(self):
        run_ranks(4, _submeshes)

    def test_fsdp2_over_tensor_parallel_makes_strided_shards(self):
        run_ranks(4, _fsdp2_over_tensor_parallel)

    def test_perturb_a_whole_dtensor_refuse_a_sharded_one(self):
        run_ranks(1, _perturb_dtensors)
        run_ranks(2, _perturb_dtensors)


if __name__ == "__main__":
    unittest.main()
