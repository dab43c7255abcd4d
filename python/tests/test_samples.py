"""The bundled sample traces (resources/samples) are what examples/gpt/samples.py says they
are: samples.json holds the bug corpus's expectations, every folder the run it names, the
buggy samples share the clean sample's references, and the trainer still writes the same
bytes (else scripts/make_samples.sh must be run again)."""

import filecmp
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLES_DIR = os.path.join(ROOT, "resources", "samples")
sys.path[:0] = [os.path.join(ROOT, "examples", "gpt"), os.path.join(ROOT, "examples")]
import samples  # noqa: E402
from bugs import CONFIGS  # noqa: E402

STALE = "the bundled samples are stale: run scripts/make_samples.sh"


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

    def test_the_trainer_writes_the_same_bytes(self):
        sample = min(samples.SAMPLES, key=lambda s: CONFIGS[s.config].world)  # the quickest
        bundled = os.path.join(SAMPLES_DIR, sample.name, "dist")
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(samples.train_command(tmp, *samples.dist_args(sample)), check=True,
                           stdout=subprocess.DEVNULL)
            files = sorted(os.listdir(bundled))
            self.assertEqual(sorted(os.listdir(tmp)), files, STALE)
            match, mismatch, errors = filecmp.cmpfiles(bundled, tmp, files, shallow=False)
            self.assertEqual((mismatch, errors), ([], []), f"{sample.name}: {STALE}")


if __name__ == "__main__":
    unittest.main()
