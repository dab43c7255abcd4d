"""Input rewriting: runs examples/gpt (gloo, CPU processes) against its reference with and
without `--rewrite-inputs` and checks that the rewritten inputs are the reference's slices bit
for bit, that the cascade is cut, and that every faulty module still shows."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
import torch

import ttrace
from test_capture import assemble, load, rel_err

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN = os.path.join(ROOT, "examples", "gpt", "train.py")
BUG = "row_bias_every_rank"
# the row-parallel linears: the modules row_bias_every_rank makes faulty
FAULTY = {"layers.0.attn.proj", "layers.0.mlp.fc2", "layers.1.attn.proj"}
FAULTY_ERROR = 0.05  # the bug's relative error is about 0.2
CLEAN_ERROR = 1e-5  # fp32 round-off of a TP run


def train(out, *args):
    subprocess.run([sys.executable, TRAIN, "--out", out, "--iterations", "1", *args],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def digest(folder):
    h = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            h.update(name.encode() + f.read())
    return h.hexdigest()


def forward_inputs(folder):
    """[(rank, attrs dict, stored array)] of every forward_input of a trace folder."""
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    out = []
    for entry in manifest["ranks"]:
        with h5py.File(os.path.join(folder, entry["file"]), "r") as f:
            for ds in f["tensors"].values():
                if ds.attrs["kind"] == "forward_input":
                    out.append((entry["rank"], dict(ds.attrs), ds[()]))
    return out


def reference_slice(reference, attrs):
    """The stored reference values at the global ranges of a distributed dataset."""
    data = reference[(attrs["name"], attrs["index"], attrs["iteration"], attrs["micro_batch"])]
    if "ranges" not in attrs:
        return data
    picks = [np.concatenate([np.arange(a, b) for a, b in dim])
             for dim in json.loads(attrs["ranges"])]
    return data[np.ix_(*picks)]


def output_errors(dist, ref):
    """{module: relative error of its first forward output, iteration 0, micro-batch 0}"""
    return {k[0]: rel_err(whole, ref[k][0]) for k, (whole, _) in dist.items()
            if k[1:] == ("forward_output", 0, 0, 0)}


class RewriteExampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ttrace-rewrite-")
        out = lambda name: os.path.join(cls.tmp.name, name)  # noqa: E731
        train(out("ref"), "--role", "reference")
        before = digest(out("ref"))
        train(out("dist"), "--tp", "2", "--bug", BUG)
        train(out("rewritten"), "--tp", "2", "--bug", BUG, "--rewrite-inputs", out("ref"))
        # zig-zag context-parallel chunks: two ranges per sequence dimension
        train(out("cp_rewritten"), "--tp", "1", "--cp", "2", "--rewrite-inputs", out("ref"))
        cls.ref_unchanged = digest(out("ref")) == before
        cls.folder = {n: out(n) for n in ("ref", "dist", "rewritten", "cp_rewritten")}
        cls.traces = {n: load(f) for n, f in cls.folder.items()}
        cls.whole = {n: assemble(t[1]) for n, t in cls.traces.items()}
        cls.ref_stored = {(a["name"], a["index"], a["iteration"], a["micro_batch"]): data
                          for _, a, data in forward_inputs(cls.folder["ref"])}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_reference_folder_is_not_written(self):
        self.assertTrue(self.ref_unchanged)

    def test_without_rewriting_errors_cascade(self):
        ref = self.whole["ref"]
        for module in ("layers.0.drop1", "layers.0.norm2", "layers.1.norm1", "head"):
            key = (module, "forward_input", 0, 0, 0)
            self.assertGreater(rel_err(self.whole["dist"][key][0], ref[key][0]), FAULTY_ERROR,
                               module)
        self.assertNotIn("input_rewriting", self.traces["dist"][0]["capture"])

    def check_inputs_are_reference_slices(self, run):
        inputs = forward_inputs(self.folder[run])
        self.assertTrue(inputs)
        for rank, attrs, data in inputs:
            expected = reference_slice(self.ref_stored, attrs)
            self.assertEqual(data.dtype, expected.dtype)
            self.assertTrue(np.array_equal(data, expected),
                            f"rank {rank} {attrs['name']} input {attrs['index']}")
        info = self.traces[run][0]["capture"]["input_rewriting"]
        self.assertEqual(info["reference"], self.folder["ref"])
        per_rank = {r["rank"]: r for r in info["ranks"]}
        self.assertEqual(sorted(per_rank), list(range(self.traces[run][0]["world_size"])))
        for rank, counts in per_rank.items():
            recorded = sum(1 for r, _, _ in inputs if r == rank)
            self.assertEqual((counts["rewritten"], counts["not_found"], counts["partial"]),
                             (recorded, 0, 0), f"rank {rank}")

    def test_rewritten_inputs_are_reference_slices(self):
        self.check_inputs_are_reference_slices("rewritten")

    def test_rewritten_zigzag_inputs_are_reference_slices(self):
        self.check_inputs_are_reference_slices("cp_rewritten")

    def test_every_faulty_module_shows_and_only_those(self):
        errors = output_errors(self.whole["rewritten"], self.whole["ref"])
        shown = {m for m, e in errors.items() if e > FAULTY_ERROR}
        self.assertEqual(shown, FAULTY)
        for module, e in errors.items():
            if module not in FAULTY:
                self.assertLess(e, CLEAN_ERROR, module)
        # without rewriting the first faulty module spoils everything after it
        cascade = output_errors(self.whole["dist"], self.whole["ref"])
        self.assertGreater(len({m for m, e in cascade.items() if e > FAULTY_ERROR}), len(FAULTY))

    def test_clean_zigzag_run_has_no_faulty_module(self):
        errors = output_errors(self.whole["cp_rewritten"], self.whole["ref"])
        self.assertTrue(errors)
        self.assertLess(max(errors.values()), CLEAN_ERROR)

    def test_gradients_still_reach_the_first_layers(self):
        for rank, pieces in self.traces["rewritten"][1].items():
            grads = {p["name"] for p in pieces if p["kind"] == "param_grad"}
            self.assertIn("embedding.weight", grads, f"rank {rank}")
            self.assertIn("layers.0.attn.qkv.weight", grads, f"rank {rank}")


class RewriteApiTest(unittest.TestCase):
    """Single process: two linears, the first one different from the reference's."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ttrace-rewrite-api-")
        self.ref = os.path.join(self.tmp.name, "ref")

    def tearDown(self):
        self.tmp.cleanup()

    def model(self, seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))

    def run_model(self, model, folder, x, **kwargs):
        cap = ttrace.Capture(model, folder, **kwargs)
        with cap.step(0):
            model(x).sum().backward()
        cap.close()

    def test_inputs_replaced_gradients_pass_through(self):
        x = torch.arange(8.0).reshape(2, 4)
        self.run_model(self.model(0), self.ref, x)
        model = self.model(0)
        with torch.no_grad():
            model[0].weight.mul_(2)
        seen = []  # a forward hook sees the inputs the module ran on, after the pre-hooks
        model[1].register_forward_hook(lambda m, args, out: seen.append(args[0]))
        out = os.path.join(self.tmp.name, "rewritten")
        self.run_model(model, out, x, rewrite_inputs_from=self.ref)
        expected = self.model(0)[0](x)
        self.assertTrue(torch.equal(seen[0], expected))
        self.assertTrue(seen[0].requires_grad)
        self.assertIsNotNone(model[0].weight.grad)  # the backward went through the rewrite
        with open(os.path.join(out, "manifest.json")) as f:
            info = json.load(f)["capture"]["input_rewriting"]
        self.assertEqual(info["ranks"], [{"rank": 0, "rewritten": 2, "not_found": 0,
                                          "partial": 0}])

    def test_inputs_missing_from_the_reference_stay_and_are_counted(self):
        x = torch.ones(2, 4)
        self.run_model(self.model(0), self.ref, x, modules=["1"])
        model = self.model(0)
        seen = []
        model[0].register_forward_hook(lambda m, args, out: seen.append(args[0]))
        out = os.path.join(self.tmp.name, "partly")
        self.run_model(model, out, x, rewrite_inputs_from=self.ref)
        self.assertIs(seen[0], x)
        with open(os.path.join(out, "manifest.json")) as f:
            info = json.load(f)["capture"]["input_rewriting"]
        self.assertEqual(info["ranks"], [{"rank": 0, "rewritten": 1, "not_found": 1,
                                          "partial": 0}])

    def test_bad_reference_folder_is_named(self):
        missing = os.path.join(self.tmp.name, "missing")
        with self.assertRaisesRegex(ValueError, "missing/manifest.json"):
            ttrace.Capture(self.model(0), os.path.join(self.tmp.name, "a"),
                           rewrite_inputs_from=missing)
        dist = os.path.join(self.tmp.name, "dist")
        ttrace.Capture(self.model(0), dist, role="distributed").close()
        with self.assertRaisesRegex(ValueError, "dist/manifest.json: role 'distributed'"):
            ttrace.Capture(self.model(0), os.path.join(self.tmp.name, "b"),
                           rewrite_inputs_from=dist)

    def test_reference_of_another_shape_is_named(self):
        x = torch.ones(2, 4)
        self.run_model(self.model(0), self.ref, x)
        model = self.model(0)
        cap = ttrace.Capture(model, os.path.join(self.tmp.name, "c"), rewrite_inputs_from=self.ref)
        with self.assertRaisesRegex(ValueError, r"rank00000\.h5 dataset /tensors/\d+ \(0 "
                                                r"forward_input 0\): reference shape"):
            with cap.step(0):
                model(torch.ones(3, 4))
        cap.close()


if __name__ == "__main__":
    unittest.main()
