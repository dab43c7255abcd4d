"""The bundled sample traces (resources/samples) are what examples/gpt/samples.py says they
are: samples.json holds the bug corpus's expectations, every folder the run it names, the
buggy samples share the clean sample's references, and the trainer still writes the same
trace, up to the last bits of a value (else scripts/make_samples.sh must be run again)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLES_DIR = os.path.join(ROOT, "resources", "samples")
sys.path[:0] = [os.path.join(ROOT, "examples", "gpt"), os.path.join(ROOT, "examples")]
import samples  # noqa: E402
from bugs import CONFIGS  # noqa: E402

STALE = "the bundled samples are stale: run scripts/make_samples.sh"
EPSILON = {"fp32": 2.0**-23, "bf16": 2.0**-7, "fp16": 2.0**-10}


def decoded(words, dtype):
    """A dataset's stored words as float64 values (docs/trace-format.md)."""
    if dtype == "bf16":
        return (words.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "fp16":
        return words.view(np.float16).astype(np.float64)
    return words.astype(np.float64)


def manifest(folder):
    with open(os.path.join(folder, "manifest.json")) as f:
        return json.load(f)


class BundledSamplesTest(unittest.TestCase):
    def test_samples_json_holds_the_corpus_expectations(self):
        with open(os.path.join(SAMPLES_DIR, "samples.json")) as f:
            recorded = json.load(f)
        self.assertEqual(recorded["samples"], [samples.expectations(s) for s in samples.SAMPLES],
                         STALE)
        self.assertEqual(sorted(e.name for e in os.scandir(SAMPLES_DIR) if e.is_dir()),
                         sorted(s.name for s in samples.SAMPLES), STALE)

    def test_each_folder_is_the_run_it_names(self):
        for sample in samples.SAMPLES:
            with self.subTest(sample.name):
                folder = os.path.join(SAMPLES_DIR, sample.name)
                dist = manifest(os.path.join(folder, "dist"))
                config = CONFIGS[sample.config]
                self.assertEqual(dist["role"], "distributed")
                self.assertEqual(dist["model"]["bug"], sample.bug or "none")
                self.assertEqual(dist["world_size"], config.world)
                self.assertEqual({k: dist["parallel"][k] for k in ("tp", "dp", "pp", "cp", "sp")},
                                 {"tp": config.tp, "dp": config.dp, "pp": config.pp,
                                  "cp": config.cp, "sp": config.sp})
                self.assertEqual(dist["dtype"]["recipe"], samples.DTYPE)
                for role, name in (("ref", "reference"), ("pert", "perturbed-reference")):
                    path = os.path.join(folder, role)
                    self.assertEqual(manifest(path)["role"], name)
                    self.assertEqual(manifest(path)["dtype"]["recipe"], samples.DTYPE)
                    if sample.name != samples.REFERENCES:
                        self.assertTrue(os.path.islink(path), f"{path}: not a link")
                        self.assertEqual(os.path.realpath(path), os.path.realpath(
                            os.path.join(SAMPLES_DIR, samples.REFERENCES, role)))

    def test_the_trainer_writes_the_same_trace(self):
        # The same files, datasets and attributes, and the same values up to the last bits:
        # torch's CPU kernels sum in an order that depends on the processor's vector width, so
        # a machine with AVX-512 and one without differ by an ulp here and there (seen: one
        # fp32 element of row_bias_every_rank). A stale sample differs by far more.
        sample = min(samples.SAMPLES, key=lambda s: CONFIGS[s.config].world)  # the quickest
        bundled = os.path.join(SAMPLES_DIR, sample.name, "dist")
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(samples.train_command(tmp, *samples.dist_args(sample)), check=True,
                           stdout=subprocess.DEVNULL)
            files = sorted(os.listdir(bundled))
            self.assertEqual(sorted(os.listdir(tmp)), files, STALE)
            self.assertEqual(manifest(tmp), manifest(bundled), f"{sample.name}: {STALE}")
            for name in files:
                if name.endswith(".h5"):
                    with self.subTest(name):
                        self.assert_same_rank_file(os.path.join(bundled, name),
                                                   os.path.join(tmp, name))

    def assert_same_rank_file(self, bundled, written):
        with h5py.File(bundled, "r") as a, h5py.File(written, "r") as b:
            self.assertEqual(dict(a.attrs), dict(b.attrs), STALE)
            self.assertEqual(sorted(a["tensors"]), sorted(b["tensors"]), STALE)
            for key in a["tensors"]:
                x, y = a["tensors"][key], b["tensors"][key]
                where = f"{bundled}: /tensors/{key} ({x.attrs['name']}): {STALE}"
                self.assertEqual({k: str(v) for k, v in x.attrs.items()},
                                 {k: str(v) for k, v in y.attrs.items()}, where)
                self.assertEqual((x.dtype, x.shape), (y.dtype, y.shape), where)
                dtype = str(x.attrs["dtype"])
                u, v = decoded(x[()], dtype), decoded(y[()], dtype)
                # Four units of the last place of the largest value of the tensor.
                bound = 4 * EPSILON[dtype] * max(float(np.abs(u).max(initial=0)), 1e-30)
                self.assertLessEqual(float(np.abs(u - v).max(initial=0)), bound, where)


if __name__ == "__main__":
    unittest.main()
