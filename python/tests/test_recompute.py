"""Activation checkpointing and torch.compile under the capture: a recomputed forward is compared
with the first one bit for bit, never recorded twice; a recomputation that does not repeat the
forward (dropout without its RNG state restored) is named; compiled and checkpoint-wrapped
modules are recorded under the eager module's names."""

import json
import os
import subprocess
import unittest
import warnings

import h5py
import numpy as np
import torch
import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import checkpoint

import ttrace
from distributed import temporary_folder


class Block(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x):
        return x + self.fc2(self.drop(self.act(self.fc1(x))))


class Model(nn.Module):
    """Two blocks, each run as `how` says: "eager", "reentrant" or "non-reentrant"
    torch.utils.checkpoint, "no-rng" (non-reentrant without restoring the RNG state: the
    bug), "wrapper" (checkpoint_wrapper) or "compiled" (torch.compile per block)."""

    def __init__(self, how, dropout=0.0):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([Block(dropout), Block(dropout)])
        self.how = how
        if how == "wrapper":
            for i, block in enumerate(self.layers):
                self.layers[i] = checkpoint_wrapper(block)
        if how == "compiled":  # dynamo alone: the naming and the hooks, without a C compiler
            for i, block in enumerate(self.layers):
                self.layers[i] = torch.compile(block, backend="eager", fullgraph=True)
        if how == "compiled-in-place":  # torchtitan's per-block compile
            for block in self.layers:
                block.compile(backend="eager", fullgraph=True)

    def forward(self, x):
        for block in self.layers:
            if self.how in ("reentrant", "non-reentrant", "no-rng"):
                x = checkpoint(block, x, use_reentrant=self.how == "reentrant",
                               preserve_rng_state=self.how != "no-rng")
            else:
                x = block(x)
        return x


def capture(folder, how, dropout=0.0, after=0, role="reference"):
    """One captured iteration, then `after` iterations not captured; returns {key: stored
    values} and the rank file's attributes."""
    model = Model(how, dropout)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    cap = ttrace.Capture(model, folder, optimizer=optimizer, role=role)
    torch.manual_seed(1)
    for _ in range(1 + after):
        x = torch.randn(4, 8, requires_grad=True)
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    cap.close()
    tensors = {}
    with h5py.File(os.path.join(folder, "rank00000.h5")) as f:
        for ds in f["tensors"].values():
            key = tuple(ds.attrs[a] for a in ("name", "kind", "index", "iteration",
                                              "micro_batch"))
            assert key not in tensors, f"{key} recorded twice"
            tensors[key] = ds[()]
        attributes = dict(f.attrs)
    return tensors, attributes


class RecomputationTest(unittest.TestCase):
    def setUp(self):
        self.eager, attributes = capture(os.path.join(temporary_folder(self), "eager"), "eager")
        self.assertNotIn("recomputations", attributes)

    def assert_like_eager(self, how):
        tensors, attributes = capture(os.path.join(temporary_folder(self), how), how)
        self.assertEqual(sorted(tensors), sorted(self.eager))
        for key, values in self.eager.items():
            np.testing.assert_array_equal(tensors[key], values, err_msg=str(key))
        return attributes

    def assert_recomputed_the_same(self, how):
        attributes = self.assert_like_eager(how)
        recomputations = json.loads(attributes["recomputations"])
        # the hooked modules of both blocks run again (a non-reentrant checkpoint stops once
        # it has what the backward needs): their forward inputs and outputs are compared
        self.assertGreater(recomputations["compared"], 2 * 5, recomputations)
        self.assertLessEqual(recomputations["compared"], 2 * 5 * 2, recomputations)
        self.assertEqual(recomputations["differing"], [])

    def test_non_reentrant_checkpoint(self):
        self.assert_recomputed_the_same("non-reentrant")

    def test_reentrant_checkpoint(self):
        self.assert_recomputed_the_same("reentrant")

    def test_checkpoint_wrapper(self):
        self.assert_recomputed_the_same("wrapper")

    def test_compiled_blocks_are_named_as_eager_ones(self):
        self.assert_like_eager("compiled")

    def test_full_graphs_run_eagerly_while_captured_and_compiled_after(self):
        # torchtitan compiles each block in place with fullgraph=True, which refuses the
        # capture's hooks: the captured iteration runs them eagerly, the next one compiled
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        folder = os.path.join(temporary_folder(self), "in-place")
        tensors, _ = capture(folder, "compiled-in-place", after=1)
        self.assertEqual(sorted(tensors), sorted(self.eager))
        for key, values in self.eager.items():
            np.testing.assert_array_equal(tensors[key], values, err_msg=str(key))
        self.assertGreater(torch._dynamo.utils.counters["stats"]["unique_graphs"], 0)

    def test_a_recomputation_with_another_dropout_mask_is_named(self):
        folder = os.path.join(temporary_folder(self), "no-rng")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, attributes = capture(folder, "no-rng", dropout=0.5)
        differing = json.loads(attributes["recomputations"])["differing"]
        names = {(d["name"], d["kind"]) for d in differing}
        # the dropout's output differs, and everything computed from it
        self.assertIn(("layers.0.drop", "forward_output"), names)
        self.assertNotIn(("layers.0.fc1", "forward_output"), names)
        self.assertTrue(all(0 < d["elements_differing"] <= d["elements"] for d in differing))
        said = " ".join(str(w.message) for w in caught)
        self.assertIn("layers.0.drop forward_output[0] (iteration 0, micro-batch 0) recomputed "
                      "by activation checkpointing differs from its first forward", said)


class CheckedRecomputationTest(unittest.TestCase):
    """The checker reports a recomputation that differs like a replica mismatch: the tensor is
    faulty, its module is the root cause and its rank the faulty shard's; a reference whose
    own recomputation differs is warned about."""

    @classmethod
    def setUpClass(cls):
        cls.checker = os.environ.get("TTRACE_CHECK")
        if not cls.checker:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")

    def check(self, distributed_how, reference_how):
        tmp = temporary_folder(self)
        folders = {role: os.path.join(tmp, role) for role in ("distributed", "reference")}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the capture's own warning is test_recompute's
            capture(folders["distributed"], distributed_how, dropout=0.5, role="distributed")
            capture(folders["reference"], reference_how, dropout=0.5)
        report = os.path.join(tmp, "report.json")
        done = subprocess.run([self.checker, folders["distributed"], folders["reference"],
                               "--no-cache", "--json", report], capture_output=True, text=True)
        with open(report) as f:
            return done, json.load(f)

    def test_a_recomputation_that_differs_is_the_root_cause(self):
        done, report = self.check("no-rng", "non-reentrant")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        localization = report["localization"]
        first = localization["first_faulty"]["tensor"]
        self.assertEqual(first, "layers.0.drop forward_output[0] it0 mb0", localization)
        self.assertEqual(localization["root_cause"]["module"], "layers.0.drop", localization)
        self.assertIn("recomputed by activation checkpointing on rank 0 differently from its "
                      "first forward", localization["root_cause"]["reason"])
        self.assertEqual(localization["faulty_shard"]["ranks"], [0], localization)
        tensor = report["tensors"][localization["first_faulty"]["result"]]
        self.assertTrue(tensor["faulty"])
        self.assertLessEqual(tensor["normalized_error"], 1.0)  # its first forward is right
        [mismatch] = tensor["recomputation_mismatches"]
        self.assertEqual(mismatch["rank"], 0)
        self.assertEqual(mismatch["elements"], 4 * 16)
        self.assertGreater(mismatch["differing_elements"], 0)
        self.assertIn("recomputed by activation checkpointing", done.stdout)

    def test_a_reference_whose_recomputation_differs_is_warned_about(self):
        _, report = self.check("non-reentrant", "no-rng")
        warned = [d for d in report["diagnostics"]
                  if "the reference recomputed this forward under activation checkpointing "
                     "differently" in d["message"]]
        self.assertTrue(warned, report["diagnostics"])
        self.assertEqual(warned[0]["tensor"], "layers.0.drop forward_output[0] it0 mb0")
        self.assertFalse(any(t["recomputation_mismatches"] for t in report["tensors"]))


if __name__ == "__main__":
    unittest.main()
