"""torchao's microscaling tensors in the capture: MXFP8 and MXFP4 (MXTensor) and NVFP4
(NVFP4Tensor), quantized by torchao itself, are stored as their own words and scales and decode
to torchao's own dequantization (bit for bit with E8M0 scales); and the checker, run on shards torchao quantized,
passes a right run and finds a shard quantized with its own tensor scale."""

import json
import os
import subprocess
import tempfile
import unittest

import h5py
import numpy as np
import torch
from torchao.prototype.mx_formats.mx_tensor import MXTensor
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

import ttrace
from ttrace.quantized import torchao_quantized
from ttrace.writer import TraceWriter, _fp8_table, expand_scales, unpack_fp4


def dense(t):
    """torchao's own dequantization of `t`, in fp32."""
    return t.dequantize(torch.float32).numpy()


def nvfp4(x, whole=None):
    """x quantized by torchao to NVFP4 with the tensor scale of `whole` (default x)."""
    amax = (x if whole is None else whole).abs().max().float()
    return NVFP4Tensor.to_nvfp4(x, per_tensor_scale=amax / (6 * 448))


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 4)

    def forward(self, x):
        return self.fc(x)


class TorchaoTensorsTest(unittest.TestCase):
    def test_stored_as_their_words_and_decoded_as_torchao_decodes_them(self):
        torch.manual_seed(0)
        x = torch.randn(4, 64, dtype=torch.bfloat16)
        tensors = {
            1: MXTensor.to_mx(x, torch.float8_e4m3fn, 32),
            2: MXTensor.to_mx(x, torch.float8_e4m3fn, 32).t(),  # blocks along dimension 0
            3: MXTensor.to_mx(x, torch.float4_e2m1fn_x2, 32),
            4: nvfp4(x),
        }
        with tempfile.TemporaryDirectory() as tmp:
            cap = ttrace.Capture(Tiny(), tmp, iterations=[0], dtype_recipe="fp4")
            with cap.step(0):
                for index, t in tensors.items():
                    cap.record_quantized("fc", "forward_input", index, t)
                with self.assertRaisesRegex(TypeError, "takes a torchao MXTensor"):
                    cap.record_quantized("fc", "forward_input", 5, x)
                with self.assertRaisesRegex(ValueError, "transposed torchao MXTensor of fp4"):
                    cap.record_quantized("fc", "forward_input", 5,
                                         MXTensor.to_mx(x, torch.float4_e2m1fn_x2, 32).t())
                with self.assertRaisesRegex(ValueError, "fp8 and fp4 elements only"):
                    cap.record_quantized("fc", "forward_input", 5,
                                         MXTensor.to_mx(x, "fp6_e2m3", 32))
            cap.close()
            with h5py.File(os.path.join(tmp, "rank00000.h5")) as f:
                stored = {int(ds.attrs["index"]): (dict(ds.attrs), ds[()], f["scale_inv"][k][()])
                          for k, ds in f["tensors"].items()}
        self.assertEqual(sorted(stored), [1, 2, 3, 4])
        expected = {1: ("fp8_e4m3", (1, 32), "e8m0"), 2: ("fp8_e4m3", (32, 1), "e8m0"),
                    3: ("fp4_e2m1", (1, 32), "e8m0"), 4: ("fp4_e2m1", (1, 16), "e4m3")}
        for index, (attrs, data, scales) in stored.items():
            dtype, block, scale_format = expected[index]
            self.assertEqual((attrs["dtype"], tuple(attrs["scale_block"]), attrs["scale_format"]),
                             expected[index])
            elements = _fp8_table(dtype)[data] if dtype.startswith("fp8") else unpack_fp4(data)
            decoded = elements * expand_scales(scales, block, elements.shape) * \
                attrs.get("tensor_scale_inv", 1.0)
            if index == 4:  # torchao rounds to fp32 twice (block scale, then tensor scale)
                np.testing.assert_allclose(decoded, dense(tensors[index]), rtol=2.0 ** -23)
            else:  # E8M0 scales are powers of two: exact either way
                np.testing.assert_array_equal(decoded, dense(tensors[index]))
            self.assertEqual(tuple(attrs["global_shape"]), tuple(tensors[index].shape))
        self.assertEqual(stored[4][0]["tensor_scale_inv"], float(tensors[4].per_tensor_scale))

    def check(self, tmp, own_tensor_scale, perturbed=True):
        """A weight quantized by torchao to NVFP4, whole in the reference and in two row
        shards over TP, the shard of rank 0 with its own tensor scale when
        `own_tensor_scale`; ttrace-check's exit code and report, against a perturbed
        reference (the weight moved by bf16's unit round-off, quantized alike) when
        `perturbed`."""
        torch.manual_seed(0)
        weight = torch.randn(8, 64, dtype=torch.bfloat16)
        weight[5, 3] = 9.0  # the largest element is on rank 1's shard
        meta = dict(dtype={"recipe": "fp4", "compute": "bf16"},
                    model={"name": "tiny", "num_layers": 1})

        def add(writer, rank, quantized, ranges=None, placements=None):
            values, s = torchao_quantized(quantized)
            writer.add(rank, "layers.0.fc", "forward_input", values.float().numpy(),
                       dtype=s.format, index=1, layer=0, scale_inv=s.scale_inv.numpy(),
                       scale_block=s.block, scale_format=s.scale_format,
                       tensor_scale_inv=float(s.tensor_scale_inv),
                       global_shape=(8, 64), ranges=ranges, placements=placements)

        with TraceWriter(os.path.join(tmp, "ref"), **meta) as w:
            add(w, 0, nvfp4(weight))
        relative = 2.0**-8
        noise = 2 * torch.rand(weight.shape, generator=torch.Generator().manual_seed(1)) - 1
        with TraceWriter(os.path.join(tmp, "pert"), role="perturbed-reference",
                         perturbation={"relative": relative, "seed": 1}, **meta) as w:
            add(w, 0, nvfp4((weight.float() * (1 + relative * noise)).bfloat16()))
        with TraceWriter(os.path.join(tmp, "dist"), role="distributed", world_size=2,
                         parallel={"tp": 2}, mesh_axes=["tp"], mesh_shape=[2],
                         rank_coords={0: [0], 1: [1]}, **meta) as w:
            for rank in range(2):
                shard = weight[4 * rank:4 * rank + 4]
                quantized = nvfp4(shard, shard if own_tensor_scale and rank == 0 else weight)
                add(w, rank, quantized, [[(4 * rank, 4 * rank + 4)], [(0, 64)]],
                    {"tp": "Shard(0)"})
        report = os.path.join(tmp, "report.json")
        args = [os.environ["TTRACE_CHECK"], os.path.join(tmp, "dist"), os.path.join(tmp, "ref"),
                "--no-cache", "--json", report]
        if perturbed:
            args += ["--perturbed", os.path.join(tmp, "pert")]
        done = subprocess.run(args, capture_output=True, text=True)
        with open(report) as f:
            return done, json.load(f)

    def test_the_checker_on_shards_torchao_quantized(self):
        if not os.environ.get("TTRACE_CHECK"):
            self.skipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        with tempfile.TemporaryDirectory() as tmp:
            done, report = self.check(tmp, own_tensor_scale=False)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        tensor = report["tensors"][0]
        self.assertEqual(tensor["dtype"], "fp4_e2m1")
        self.assertEqual(tensor["normalized_error"], 0)  # the reference's rows, bit for bit
        self.assertEqual(tensor["threshold"]["method"], "perturbation")
        self.assertEqual(tensor["fp8_scales"]["reference_block"], [1, 16])
        self.assertEqual(tensor["fp8_scales"]["max_difference"], 0)
        # Without a perturbed reference an fp4 operand is judged by e2m1's epsilon: blind,
        # and the check says so rather than "no bug".
        with tempfile.TemporaryDirectory() as tmp:
            done, report = self.check(tmp, own_tensor_scale=False, perturbed=False)
        self.assertEqual(done.returncode, 4, done.stdout + done.stderr)
        self.assertTrue(report["tensors"][0]["threshold"]["blind"])
        # A shard quantized under its own tensor scale rounds its E4M3 block scales, and so
        # its elements, otherwise: rank 0's shard differs, rank 1's does not; by as much as
        # the perturbation moves the tensor (within its threshold), so values alone cannot
        # call it a fault.
        with tempfile.TemporaryDirectory() as tmp:
            done, report = self.check(tmp, own_tensor_scale=True)
        shards = {tuple(s["ranks"]): s for s in report["tensors"][0]["shards"]}
        self.assertGreater(shards[(0,)]["metrics"]["relative_error"], 0)
        self.assertEqual(shards[(1,)]["metrics"]["relative_error"], 0)
        self.assertLess(report["tensors"][0]["normalized_error"], 1)

if __name__ == "__main__":
    unittest.main()
