"""The capture on torchtitan's own models and parallelize functions (examples/torchtitan): the
manifest's parallel settings come from the run, not from the user: sequence parallelism from
the activations' layouts (torchtitan 0.3.0 declares it without parallelize_module's styles),
expert parallelism from the experts' DTensor mesh (which the job's mesh does not name)."""

import json
import os
import subprocess
import sys
import unittest

from distributed import temporary_folder

TRAIN = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torchtitan", "train.py")


def manifest(test, *args):
    out = os.path.join(temporary_folder(test), "trace")
    done = subprocess.run([sys.executable, TRAIN, "--out", out, "--iterations", "1", *args],
                          capture_output=True, text=True)
    test.assertEqual(done.returncode, 0, done.stderr[-3000:])
    with open(os.path.join(out, "manifest.json")) as f:
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


if __name__ == "__main__":
    unittest.main()
