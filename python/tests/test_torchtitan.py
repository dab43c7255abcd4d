"""The capture on torchtitan's own models and parallelize functions (examples/torchtitan): the
manifest's parallel settings come from the run, not from the user: sequence parallelism from
the activations' layouts (torchtitan 0.3.0 declares it without parallelize_module's styles),
expert parallelism from the experts' DTensor mesh (which the job's mesh does not name). And a
trusted run laid out as torchtitan lays it out is trusted: its float8 pieces under FSDP2, each
data-parallel rank quantizing its own samples, do not disagree with themselves."""

import json
import os
import subprocess
import sys
import unittest

from distributed import temporary_folder

TRAIN = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torchtitan", "train.py")


def train(test, name, *args):
    out = os.path.join(temporary_folder(test), name)
    done = subprocess.run([sys.executable, TRAIN, "--out", out, "--iterations", "1", *args],
                          capture_output=True, text=True)
    test.assertEqual(done.returncode, 0, done.stderr[-3000:])
    return out


def manifest(test, *args):
    with open(os.path.join(train(test, "trace", *args), "manifest.json")) as f:
        return json.load(f)["parallel"]


class ParallelSettingsTest(unittest.TestCase):
    def test_sequence_parallelism_is_read_from_the_activations(self):
        parallel = manifest(self, "--config", "tp2_sp")
        self.assertEqual((parallel["tp"], parallel["dp"], parallel["sp"]), (2, 1, True))
        self.assertFalse(manifest(self, "--config", "tp2")["sp"])

    def test_expert_parallelism_is_read_from_the_experts_mesh(self):
        parallel = manifest(self, "--model", "qwen3_moe", "--config", "moe_fsdp2_ep2")
        self.assertEqual((parallel["ep"], parallel["dp"], parallel["tp"]), (2, 2, 1))
        self.assertEqual(manifest(self, "--model", "qwen3_moe", "--config", "moe_fsdp2")["ep"], 1)


class LaidOutReferenceTest(unittest.TestCase):
    def test_float8_fsdp2_reference_is_trusted(self):
        checker = os.environ.get("TTRACE_CHECK")
        if not checker:
            self.skipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        reference = train(self, "reference", "--dtype", "fp8", "--config", "fsdp2",
                          "--role", "reference")
        distributed = train(self, "distributed", "--dtype", "fp8", "--config", "fsdp2")
        report = os.path.join(temporary_folder(self), "report.json")
        done = subprocess.run([checker, distributed, reference, "--no-cache",
                               "--quiet", "--json", report], capture_output=True, text=True)
        self.assertIn(done.returncode, (0, 4), done.stdout + done.stderr)  # 4: blind tensors
        with open(report) as f:
            checked = json.load(f)
        self.assertEqual(checked["runs"]["reference"]["diagnostics"], [])
        self.assertEqual(checked["localization"]["faulty_count"], 0)
        scaled = [t["fp8_scales"] for t in checked["tensors"] if t["fp8_scales"]]
        self.assertTrue(scaled)
        # activations: each data-parallel rank scaled its own samples
        self.assertTrue(any(s["data_parallel_blocks"] > 0 for s in scaled))


if __name__ == "__main__":
    unittest.main()
