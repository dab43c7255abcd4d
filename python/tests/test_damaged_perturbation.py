"""A damaged perturbed reference does not blind the check (docs/thresholds.md, "A perturbed
reference that cannot be believed"): the row_bias_every_rank sample's perturbed reference is
copied and damaged at its first faulty tensor, and the built ttrace-check must still find the
bug at its module, and say which perturbation it did not believe."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLE = os.path.join(ROOT, "resources", "samples", "row_bias_every_rank")
FIRST_FAULTY = ("layers.0.attn.proj", "forward_output", 0, 0)  # name, kind, iteration, mb
ROOT_CAUSE = "layers.0.attn.proj"


def bf16_values(words):
    return (words.astype(np.uint32) << 16).view(np.float32)


def bf16_words(values):
    """Rounded to nearest even, as torch rounds to bf16."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def dataset_of(path, name, kind, iteration, micro_batch):
    with h5py.File(path, "r") as f:
        for key, d in f["tensors"].items():
            a = d.attrs
            if (a["name"], a["kind"], int(a["iteration"]), int(a["micro_batch"])) == (
                    name, kind, iteration, micro_batch):
                return "tensors/" + key
    raise LookupError(f"{name} {kind} not in {path}")


def flip_exponent_bit(words, reference):
    words = words.copy()
    words.flat[0] ^= 1 << 14  # the exponent's top bit: x 2^128 or / 2^128
    return words


def zeroed(words, reference):
    return np.zeros_like(words)


def nan(words, reference):
    words = words.copy()
    words.flat[3] = 0x7FC0
    return words


def perturbation_1000x(words, reference):
    """The perturbation's effect 1000 times the declared one."""
    ref = bf16_values(reference).astype(np.float64)
    return bf16_words(ref + 1000 * (bf16_values(words) - ref))


class DamagedPerturbedReferenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.checker = os.environ.get("TTRACE_CHECK")
        if not cls.checker:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")

    def check_with(self, damage, tensors=(FIRST_FAULTY,), cache=False):
        """Checks the sample against its perturbed reference with `damage` done to `tensors`
        (name, kind, iteration, micro-batch); with `cache`, twice through one cache (compared,
        then shown from the store), each report returned."""
        with tempfile.TemporaryDirectory() as tmp:
            pert = os.path.join(tmp, "pert")
            shutil.copytree(os.path.join(SAMPLE, "pert"), pert)
            rank_file = os.path.join(pert, "rank00000.h5")
            with h5py.File(os.path.join(SAMPLE, "ref", "rank00000.h5"), "r") as ref, \
                    h5py.File(rank_file, "r+") as f:
                for tensor in tensors:
                    reference = ref[dataset_of(ref.filename, *tensor)][()]
                    dataset = dataset_of(rank_file, *tensor)
                    f[dataset][...] = damage(f[dataset][()], reference)
            report = os.path.join(tmp, "report.json")
            runs = []
            for _ in range(2 if cache else 1):
                where = ["--cache-dir", os.path.join(tmp, "cache")] if cache else ["--no-cache"]
                done = subprocess.run([self.checker, os.path.join(SAMPLE, "dist"),
                                       os.path.join(SAMPLE, "ref"), "--perturbed", pert,
                                       "--quiet", "--json", report] + where,
                                      capture_output=True, text=True)
                with open(report) as f:
                    runs.append((done, json.load(f)))
            return runs if cache else runs[0]

    def assert_bug_found_despite(self, damage):
        done, report = self.check_with(damage)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertEqual(report["localization"]["root_cause"]["module"], ROOT_CAUSE)
        first = report["localization"]["first_faulty"]
        self.assertEqual(first["tensor"], "layers.0.attn.proj forward_output[0] it0 mb0")
        tensor = report["tensors"][first["result"]]
        self.assertTrue(tensor["threshold"]["perturbation_rejected"])
        self.assertEqual(tensor["threshold"]["method"], "theoretical")
        warnings = [d["message"] for d in report["diagnostics"]
                    if d["severity"] == "warning" and "perturbed reference moved" in d["message"]]
        self.assertEqual(len(warnings), 1, report["diagnostics"])
        self.assertIn("layers.0.attn.proj forward_output[0] it0 mb0 (e_pert ", warnings[0])
        self.assertIn("1 tensor", warnings[0])

    def test_flipped_bit(self):
        self.assert_bug_found_despite(flip_exponent_bit)

    def test_zeroed_dataset(self):
        self.assert_bug_found_despite(zeroed)

    def test_nan(self):
        self.assert_bug_found_despite(nan)

    def test_perturbation_1000x(self):
        self.assert_bug_found_despite(perturbation_1000x)

    def test_warning_kept_through_the_cache(self):
        # The warning is derived from the results, compared now or read from the store.
        for done, report in self.check_with(zeroed, cache=True):
            self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
            self.assertTrue(any("perturbed reference moved 1 tensor" in d["message"]
                                for d in report["diagnostics"]), report["diagnostics"])

    def test_parameters_perturbed_20x(self):
        """Every first-iteration parameter perturbed 20 times the declared perturbation: still
        within half of each tensor, but beyond what perturbation.relative can give."""
        with h5py.File(os.path.join(SAMPLE, "pert", "rank00000.h5"), "r") as f:
            params = [(d.attrs["name"], "param", 0, -1) for d in f["tensors"].values()
                      if d.attrs["kind"] == "param" and int(d.attrs["iteration"]) == 0]
        self.assertGreater(len(params), 10)

        def perturbation_20x(words, reference):
            ref = bf16_values(reference).astype(np.float64)
            return bf16_words(ref + 20 * (bf16_values(words) - ref))

        done, report = self.check_with(perturbation_20x, tensors=params)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertEqual(report["localization"]["root_cause"]["module"], ROOT_CAUSE)
        warnings = [d["message"] for d in report["diagnostics"]
                    if "first-iteration parameters" in d["message"]]
        self.assertEqual(len(warnings), 1, report["diagnostics"])
        self.assertIn("perturbation.relative 0.00391", warnings[0])
        # The parameters nothing moved (zeros, ones rounded back) stay within the bound.
        rejected = [t for t in report["tensors"]
                    if t["key"]["kind"] == "param" and t["threshold"]["perturbation_rejected"]]
        self.assertGreater(len(rejected), len(params) // 2)
        self.assertIn(f"in {len(rejected)} tensors: ", warnings[0])

    def test_undamaged_keeps_the_perturbation_threshold(self):
        done, report = self.check_with(lambda words, reference: words)
        self.assertEqual(done.returncode, 1)
        self.assertFalse(any(t["threshold"]["perturbation_rejected"] for t in report["tensors"]))
        self.assertEqual(report["coverage"]["blind"], 0)


if __name__ == "__main__":
    unittest.main()
