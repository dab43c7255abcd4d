"""The theoretical tolerance of low-precision recipes, on real runs of examples/gpt (gloo, CPU
processes) checked without a perturbed reference: a recipe that rounds GEMM operands to fp8 or
fp4 moves clean tensors by steps of that format, not of bf16, and the bound says so. A clean
per-tensor fp8 run and a clean NVFP4 run raise no alarm; a bug in an fp8 run is still found."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN = os.path.join(ROOT, "examples", "gpt", "train.py")
# the recipes' element formats: e4m3 for fp8's forward operands, e2m1 for NVFP4's
ELEMENT_EPSILON = {"fp8": 2.0**-3, "nvfp4": 2.0**-1}
BUG = "row_bias_every_rank"  # a bias added on every TP rank: a wrong value, found by values
# an optimizer step moves parameters by a learning rate's share of a gradient: they keep bf16's
PARAMETERS = {"param", "updated_param"}


def train(out, *args):
    subprocess.run([sys.executable, TRAIN, "--out", out, *args], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)


class QuantizedTheoryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.checker = os.environ.get("TTRACE_CHECK")
        if not cls.checker:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        cls.tmp = tempfile.TemporaryDirectory(prefix="ttrace-quantized-theory-")
        for dtype in ELEMENT_EPSILON:
            train(cls.folder(f"ref-{dtype}"), "--dtype", dtype, "--role", "reference")
            train(cls.folder(f"clean-{dtype}"), "--dtype", dtype, "--config", "tp2_sp")
        train(cls.folder("bug-fp8"), "--dtype", "fp8", "--config", "tp2_sp", "--bug", BUG)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def folder(cls, name):
        return os.path.join(cls.tmp.name, name)

    def check(self, dist, ref):
        report = self.folder(f"{dist}.json")
        done = subprocess.run([self.checker, self.folder(dist), self.folder(ref), "--no-cache",
                               "--json", report], capture_output=True, text=True)
        with open(report) as f:
            return done.returncode, json.load(f), done.stdout

    def test_clean_runs_raise_no_alarm(self):
        for dtype, eps in ELEMENT_EPSILON.items():
            with self.subTest(dtype=dtype):
                code, report, out = self.check(f"clean-{dtype}", f"ref-{dtype}")
                self.assertIn(code, (0, 4), out)
                tensors = report["tensors"]
                self.assertTrue(tensors)
                # every activation and gradient, bf16 and fp32 ones too, judged by the recipe's
                # element epsilon; parameters by bf16's
                for tensor in tensors:
                    threshold = tensor["threshold"]
                    self.assertEqual(threshold["method"], "theoretical", tensor["tensor"])
                    if tensor["key"]["kind"] in PARAMETERS:
                        self.assertLess(threshold["theoretical"], 0.05, tensor["tensor"])
                    else:
                        self.assertGreaterEqual(threshold["theoretical"], 4 * eps,
                                                tensor["tensor"])
                    self.assertLessEqual(tensor["normalized_error"], 1.0, tensor["tensor"])

    def test_nvfp4_alone_cannot_be_judged_and_says_so(self):
        # 4 x 2^-1: every activation's and gradient's bound is 2 or more, blind, and the check
        # says it did not see them; the parameters are still judged
        code, report, out = self.check("clean-nvfp4", "ref-nvfp4")
        self.assertEqual(code, 4, out)
        for tensor in report["tensors"]:
            self.assertEqual(tensor["threshold"]["blind"],
                             tensor["key"]["kind"] not in PARAMETERS, tensor["tensor"])
        self.assertIn("blind", out)

    def test_a_bug_in_an_fp8_run_is_still_found(self):
        code, report, out = self.check("bug-fp8", "ref-fp8")
        self.assertEqual(code, 1, out)
        self.assertEqual(report["verdict"], "bug")


if __name__ == "__main__":
    unittest.main()
