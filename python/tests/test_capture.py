"""End-to-end tests of the capture: runs examples/tp_mlp (gloo, CPU processes) into a temporary
folder and checks the traces against the format spec and against the reference."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from collections import defaultdict

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "tp_mlp")
ACTIVATION_KINDS = ("forward_input", "forward_output", "output_grad", "input_grad")
PARAM_KINDS = ("param", "param_grad", "main_grad", "updated_param")


def run(*args):
    # run_all.sh picks its interpreter from PYTHON: the one running the tests
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(list(args), check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)


def train(out, role="distributed", *extra):
    run(sys.executable, os.path.join(EXAMPLE, "train.py"), "--role", role, "--out", out, *extra)


def decode(ds):
    data = ds[()]
    if ds.attrs["dtype"] == "bf16":
        return (data.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return data.astype(np.float64)


def load(folder):
    """manifest, {rank: [attrs dict + 'data', in dataset order]}"""
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    ranks = {}
    for entry in manifest["ranks"]:
        with h5py.File(os.path.join(folder, entry["file"]), "r") as f:
            assert int(f.attrs["rank"]) == entry["rank"]
            pieces = []
            for key in f["tensors"]:
                ds = f["tensors"][key]
                a = {k: ds.attrs[k] for k in ds.attrs}
                for k in ("ranges", "placements"):
                    if k in a:
                        a[k] = json.loads(a[k])
                a["data"] = decode(ds)
                pieces.append(a)
            ranks[entry["rank"]] = pieces
    return manifest, ranks


def identity(p):
    return (p["name"], p["kind"], int(p["index"]), int(p["iteration"]), int(p["micro_batch"]))


def assemble(ranks):
    """{identity: (global array, [replica arrays...])}: the shards of each replica set placed
    into the global tensor; replicas are the pieces with identical ranges."""
    groups = defaultdict(list)
    for pieces in ranks.values():
        for p in pieces:
            groups[identity(p)].append(p)
    out = {}
    for key, pieces in groups.items():
        shape = tuple(int(n) for n in pieces[0]["global_shape"])
        by_box = defaultdict(list)
        for p in pieces:
            by_box[json.dumps(p.get("ranges"))].append(p["data"])
        coverage = np.zeros(shape, dtype=np.int64)
        whole = np.zeros(shape)
        for box, datas in by_box.items():
            ranges = json.loads(box)
            if ranges is None:
                idx = tuple(slice(None) for _ in shape)
            else:
                idx = np.ix_(*[np.concatenate([np.arange(a, b) for a, b in dim]) for dim in ranges])
            coverage[idx] += 1
            whole[idx] = datas[0]
        assert (coverage == 1).all(), f"{key}: ranges do not tile {shape}"
        replicas = [list(d) for d in by_box.values()]
        out[key] = (whole, replicas)
    return out


def rel_err(a, b):
    n = np.linalg.norm(b)
    return np.linalg.norm(a - b) / n if n else np.linalg.norm(a - b)


def errors(dist, ref):
    """{identity: relative Frobenius error of the distributed tensor vs the reference}"""
    return {k: rel_err(whole, ref[k][0]) for k, (whole, _) in dist.items()}


class CaptureExampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ttrace-capture-")
        cls.out = cls.tmp.name
        run(os.path.join(EXAMPLE, "run_all.sh"), os.path.join(cls.out, "clean"))
        cls.traces = {r: load(os.path.join(cls.out, "clean", r)) for r in ("dist", "ref", "pert")}
        cls.ref = assemble(cls.traces["ref"][1])
        cls.dist = assemble(cls.traces["dist"][1])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_manifests(self):
        for role, folder in (("distributed", "dist"), ("reference", "ref"),
                             ("perturbed-reference", "pert")):
            m, ranks = self.traces[folder]
            self.assertEqual(m["format"], "ttrace")
            self.assertEqual(m["format_version"], "1.0")
            self.assertEqual(m["role"], role)
            self.assertEqual(m["capture_tool"]["name"], "ttrace-python")
            self.assertEqual([r["rank"] for r in m["ranks"]], list(range(m["world_size"])))
            self.assertEqual(int(np.prod(m["mesh"]["shape"])), m["world_size"])
            self.assertEqual(m["model"]["num_layers"], 2)
            self.assertEqual(m["capture"], {"iterations": [0, 1], "micro_batches": 2})
            self.assertEqual(m["dtype"]["compute"], "fp32")
            self.assertEqual(("perturbation" in m), role == "perturbed-reference")
        m = self.traces["dist"][0]
        self.assertEqual(m["world_size"], 4)
        self.assertEqual(m["mesh"], {"axes": ["dp", "tp"], "shape": [2, 2]})
        self.assertEqual([r["coords"] for r in m["ranks"]], [[0, 0], [0, 1], [1, 0], [1, 1]])
        self.assertEqual(self.traces["pert"][0]["perturbation"]["relative"], 2.0**-24)

    def test_seq_follows_execution_order(self):
        for folder in ("dist", "ref"):
            for rank, pieces in self.traces[folder][1].items():
                seqs = [int(p["seq"]) for p in pieces]
                self.assertEqual(seqs, sorted(set(seqs)), f"{folder} rank {rank}")
                for it in (0, 1):
                    order = [p for p in sorted(pieces, key=lambda p: p["seq"])
                             if p["iteration"] == it]
                    kinds = [p["kind"] for p in order]
                    # params, then per micro-batch forward then backward, then grads, updates
                    self.assertEqual(kinds[0], "param")
                    self.assertEqual(kinds[-1], "updated_param")
                    first_grad = kinds.index("param_grad")
                    self.assertTrue(all(k in ACTIVATION_KINDS for k in
                                        kinds[kinds.count("param"):first_grad]))
                    mbs = [int(p["micro_batch"]) for p in order if p["kind"] in ACTIVATION_KINDS]
                    self.assertEqual(mbs, sorted(mbs))
                    backward = [int(p["layer"]) for p in order
                                if p["kind"] == "input_grad" and p["micro_batch"] == 0]
                    # the head (layer -1) first, then layers in reverse
                    self.assertEqual(backward[0], -1)
                    self.assertEqual(backward[1:], sorted(backward[1:], reverse=True))

    def test_placements_and_layout(self):
        by_rank = {r: {identity(p): p for p in pieces}
                   for r, pieces in self.traces["dist"][1].items()}
        fc1_w = by_rank[1][("layers.0.fc1.weight", "param", 0, 0, -1)]
        self.assertEqual(fc1_w["placements"], {"dp": "Replicate", "tp": "Shard(0)"})
        self.assertEqual(fc1_w["ranges"], [[[16, 32]], [[0, 16]]])
        fc2_w = by_rank[1][("layers.0.fc2.weight", "param", 0, 0, -1)]
        self.assertEqual(fc2_w["placements"], {"dp": "Replicate", "tp": "Shard(1)"})
        out = by_rank[2][("layers.0.fc1", "forward_output", 0, 0, 1)]
        self.assertEqual(out["placements"], {"dp": "Shard(0)", "tp": "Shard(1)"})
        self.assertEqual(out["ranges"], [[[4, 8]], [[0, 16]]])
        self.assertEqual(list(out["global_shape"]), [8, 32])
        fc2 = by_rank[3][("layers.1.fc2", "forward_output", 0, 1, 0)]
        self.assertEqual(fc2["placements"], {"dp": "Shard(0)", "tp": "Replicate"})
        norm = by_rank[0][("layers.0.norm.weight", "param_grad", 0, 0, -1)]
        self.assertEqual(norm["placements"], {"dp": "Replicate", "tp": "Replicate"})
        self.assertEqual(int(norm["layer"]), 0)
        self.assertEqual(int(by_rank[0][("head.weight", "param", 0, 0, -1)]["layer"]), -1)
        for p in self.traces["ref"][1][0]:
            self.assertNotIn("placements", p)
            self.assertNotIn("ranges", p)

    def test_reference_has_every_distributed_tensor(self):
        missing = set(self.dist) - set(self.ref)
        self.assertFalse(missing)
        self.assertEqual(set(self.ref), set(assemble(self.traces["pert"][1])))
        for key, (whole, _) in self.dist.items():
            self.assertEqual(whole.shape, self.ref[key][0].shape, key)
        # every kind is there, for both iterations and micro-batches
        kinds = {(k[1], k[3], k[4]) for k in self.dist}
        for it in (0, 1):
            for kind in ACTIVATION_KINDS:
                self.assertIn((kind, it, 1), kinds)
            for kind in ("param", "param_grad", "updated_param"):
                self.assertIn((kind, it, -1), kinds)

    def test_clean_run_matches_reference(self):
        errs = errors(self.dist, self.ref)
        worst = max(errs, key=errs.get)
        self.assertLess(errs[worst], 1e-5, worst)
        for key, (_, replicas) in self.dist.items():
            for copies in replicas:
                for c in copies[1:]:
                    np.testing.assert_array_equal(c, copies[0], err_msg=str(key))
        # the perturbed reference differs from the reference by round-off, not more
        perr = errors(assemble(self.traces["pert"][1]), self.ref)
        self.assertLess(max(perr.values()), 1e-4)
        self.assertGreater(perr[("layers.1.fc2", "forward_output", 0, 0, 0)], 0)

    def check_bug(self, bug, layout, expected):
        """Runs `bug` in the given layout and checks that the first tensor, in rank 0's execution
        order, whose error vs the reference is far above the clean run's is `expected`."""
        out = os.path.join(self.out, bug)
        train(out, "distributed", "--bug", bug, *layout)
        _, ranks = load(out)
        dist = assemble(ranks)
        errs = errors(dist, self.ref)
        clean = errors(self.dist, self.ref)
        self.assertGreater(errs[expected], 1e3 * max(clean[expected], 1e-7))
        order = sorted(ranks[0], key=lambda p: p["seq"])
        first = next(identity(p) for p in order if errs[identity(p)] > 1e-4)
        self.assertEqual(first, expected)
        return dist

    def test_bug_row_bias_every_rank(self):
        self.check_bug("row_bias_every_rank", [],
                       ("layers.0.fc2", "forward_output", 0, 0, 0))

    def test_bug_tp_input_grad_no_allreduce(self):
        dist = self.check_bug("tp_input_grad_no_allreduce", ["--dp", "1"],
                              ("layers.1.fc1", "input_grad", 0, 0, 0))
        # the TP copies, which must be identical, are not
        _, replicas = dist[("layers.1.fc1", "input_grad", 0, 0, 0)]
        self.assertFalse(np.array_equal(replicas[0][0], replicas[0][1]))

    def test_bug_missing_dp_grad_allreduce_scale(self):
        self.check_bug("missing_dp_grad_allreduce_scale", ["--tp", "1"],
                       ("layers.0.norm.weight", "param_grad", 0, 0, -1))


if __name__ == "__main__":
    unittest.main()
