"""A reference on several ranks: the torch-native trainer (PyTorch's own parallel APIs) run as
the reference in one layout and as the distributed run in another, checked by the real
ttrace-check. A clean pair is clean with every tensor compared, with the perturbed reference
on one device or laid out too; a bug is found and localized as against a single-device
reference, also against a pipeline-parallel reference (whose stages order their tensors apart);
a reference whose own copies of a tensor differ says so, and the distributed run is not
blamed."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

from distributed import temporary_folder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "examples", "torch_native", "train.py")
sys.path.insert(0, os.path.join(ROOT, "examples"))  # corpus.py, which bugs.py imports


def _torch_native_bugs():
    """examples/torch_native/bugs.py, under a name no other trainer's bugs.py takes."""
    path = os.path.join(ROOT, "examples", "torch_native", "bugs.py")
    spec = importlib.util.spec_from_file_location("torch_native_bugs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BUGS


BUGS = _torch_native_bugs()


def train(out, role="distributed", config=None, bug=None):
    argv = [sys.executable, TRAIN, "--role", role, "--out", out]
    # a perturbed reference on several ranks keeps its samples in order (docs/capture.md)
    argv += ["--config", config, "--sample-order", "kept"] if config else []
    argv += ["--bug", bug] if bug else []
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")
    return out


class DistributedReferenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.checker = os.environ.get("TTRACE_CHECK")
        if not cls.checker:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        tmp = tempfile.TemporaryDirectory()
        cls.addClassCleanup(tmp.cleanup)
        cls.tmp = tmp.name
        at = lambda name: os.path.join(cls.tmp, name)  # noqa: E731
        cls.pert = train(at("pert"), role="perturbed-reference")
        cls.pert_fsdp2 = train(at("pert-fsdp2"), role="perturbed-reference", config="fsdp2")
        cls.ref_fsdp2 = train(at("ref-fsdp2"), role="reference", config="fsdp2")
        cls.ref_pp2 = train(at("ref-pp2"), role="reference", config="pp2")
        cls.ref_tp2 = train(at("ref-tp2"), role="reference", config="tp2")
        cls.clean = train(at("clean-tp2_sp"), config="tp2_sp")
        cls.bug = train(at("bug-tp2_sp"), config="tp2_sp", bug="sp_norm_not_in_plan")

    def check(self, dist, ref, pert=None, cache=None):
        report = os.path.join(temporary_folder(self), "report.json")
        argv = [self.checker, dist, ref, "--json", report]
        argv += ["--cache-dir", cache] if cache else ["--no-cache"]
        argv += ["--perturbed", pert] if pert else []
        done = subprocess.run(argv, capture_output=True, text=True)
        with open(report) as f:
            return done, json.load(f)

    def test_a_clean_run_against_a_reference_in_another_layout_is_clean(self):
        for ref, pert in ((self.ref_fsdp2, self.pert), (self.ref_pp2, self.pert_fsdp2)):
            done, report = self.check(self.clean, ref, pert)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            self.assertTrue(report["coverage"]["complete"], report["coverage"])
            self.assertFalse(report["diagnostics"], report["diagnostics"])

    def test_a_bug_is_localized_against_a_pipeline_parallel_reference(self):
        expected = BUGS["sp_norm_not_in_plan"].root_cause
        for ref in (self.ref_pp2, self.ref_fsdp2):
            done, report = self.check(self.bug, ref, self.pert)
            self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
            root = report["localization"]["root_cause"]["module"]
            self.assertIn(root, expected, (ref, report["localization"]["root_cause"]))

    def test_references_in_the_index_cache_give_the_report_held_ones_give(self):
        # the records of all three runs read back from the cache, tensor by tensor, as a check
        # of a large trusted run reads them (docs/checker.md, "Distributed references")
        held_done, held = self.check(self.bug, self.ref_pp2, self.pert_fsdp2)
        cached_done, cached = self.check(self.bug, self.ref_pp2, self.pert_fsdp2,
                                         cache=os.path.join(temporary_folder(self), "cache"))
        self.assertEqual(cached_done.returncode, held_done.returncode, cached_done.stdout)
        self.assertFalse(cached["comparison"]["from_cache"])
        for field in ("verdict", "summary", "coverage", "localization", "tensors",
                      "diagnostics"):
            self.assertEqual(cached[field], held[field], field)

    def test_a_reference_whose_copies_differ_says_so(self):
        ref = os.path.join(temporary_folder(self), "ref")
        shutil.copytree(self.ref_tp2, ref)
        name = damage_a_replicated_copy(os.path.join(ref, "rank00001.h5"))
        done, report = self.check(self.clean, ref, self.pert)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        errors = [d for d in report["diagnostics"]
                  if d["severity"] == "error" and "disagrees with itself" in d["message"]]
        self.assertEqual(len(errors), 1, report["diagnostics"])
        self.assertTrue(errors[0]["tensor"].startswith(name), errors[0])
        self.assertTrue(errors[0]["file"].endswith("rank00001.h5"), errors[0])
        # the reference's own findings, as fields of its run: the kind and the rank
        own = report["runs"]["reference"]["diagnostics"]
        self.assertEqual([(d["code"], d["rank"], d["severity"]) for d in own],
                         [("copies_differ", 1, "error")], own)
        self.assertFalse(report["runs"]["distributed"]["diagnostics"])
        self.assertEqual(report["verdict"], "no bug in part", report["summary"])
        self.assertIn("A trusted run disagrees with itself: the reference's copies of 1 tensor "
                      "differ", report["summary"])
        self.assertEqual(report["coverage"]["not_comparable"], 1, report["coverage"])


def damage_a_replicated_copy(path):
    """Adds 1 to the first element of the first forward output this rank holds as a copy
    replicated over tensor parallelism (not a partial sum); returns its module name."""
    with h5py.File(path, "r+") as f:
        for ds in f["tensors"].values():
            placements = json.loads(ds.attrs.get("placements", "{}"))
            replicated = placements and set(placements.values()) == {"Replicate"}
            if ds.attrs["kind"] == "forward_output" and replicated and ds.attrs["dtype"] == "fp32":
                values = ds[...]
                values.flat[0] += np.float32(1)
                ds[...] = values
                return str(ds.attrs["name"])
    raise AssertionError(f"{path} holds no whole forward output")


if __name__ == "__main__":
    unittest.main()
