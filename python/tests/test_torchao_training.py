"""torchao's low-precision training modules under the three-line capture: the operands their
GEMMs quantize inside, forward and backward (Float8Linear's tensorwise and rowwise fp8,
MXFP8Linear, a linear whose weight torchao's quantize_ wrapped for fp8 or MXFP8 training) are
recorded with no code of the user's, as the GEMM read them, laid out as what they are views of, in the reference's sample
order in a reordered perturbed reference; and on a tensor-parallel run of torchao's own
Float8ColwiseParallel and Float8RowwiseParallel (gloo, CPU processes), the checker passes a
right run and finds the fp8 scale of a shard quantized by its own amax rather than the whole
tensor's. torchtitan's float8 converter under FSDP2 and TP is examples/torchtitan's fp8."""

import json
import os
import subprocess
import tempfile
import unittest
from unittest import mock

import h5py
import numpy as np
import torch
from torch.distributed.tensor import DTensor, Replicate
from torchao.float8 import Float8LinearConfig, convert_to_float8_training
from torchao.prototype.moe_training.config import (Float8TrainingOpConfig,
                                                   MXFP8TrainingOpConfig)
from torchao.prototype.moe_training.mxfp8_linear import MXFP8Linear
from torchao.quantization import quantize_
from torchao.quantization.quantize_.common.kernel_preference import KernelPreference

import ttrace
from ttrace.operands import flattened, transposed
from ttrace.placement import Layout
from ttrace.writer import _fp8_table, expand_scales

from distributed import run_ranks


class Block(torch.nn.Module):
    def __init__(self, linear=torch.nn.Linear):
        super().__init__()
        self.up = linear(64, 128, bias=False)
        self.down = linear(128, 64, bias=False)
        for layer in (self.up, self.down):  # the largest element in one place, on one shard
            torch.nn.init.normal_(layer.weight, std=0.05)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Model(torch.nn.Module):
    def __init__(self, linear=torch.nn.Linear):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block(linear)])

    def forward(self, x):
        return self.layers[0](x)


def float8(recipe):
    """torchao's fp8 training recipe `recipe`, its GEMMs emulated (the CPU has no fp8 GEMM)."""
    config = Float8LinearConfig.from_recipe_name(recipe)
    return Float8LinearConfig(**{**config.__dict__, "emulate": True})


def float8_model(recipe):
    model = Model()
    convert_to_float8_training(model, config=float8(recipe))
    return model


def mxfp8_model():
    return Model(lambda i, o, bias: MXFP8Linear(
        i, o, bias=bias, kernel_preference=KernelPreference.EMULATED))


def wrapped_model(config):
    """A model of plain linears whose weights torchao's quantize_ wrapped per `config`."""
    model = Model()
    quantize_(model, config, filter_fn=lambda module, fqn: isinstance(module, torch.nn.Linear))
    return model


def stored(folder, rank=0):
    """(name, kind, index) -> (attributes, decoded fp32 values) of a rank file's iteration 0."""
    found = {}
    with h5py.File(os.path.join(folder, f"rank{rank:05d}.h5")) as f:
        for key, ds in f["tensors"].items():
            attrs = dict(ds.attrs)
            data = ds[()]
            if attrs["dtype"].startswith("fp8"):
                scales = f["scale_inv"][key][()] if key in f.get("scale_inv", {}) \
                    else attrs["scale_inv"]
                block = tuple(attrs["scale_block"]) if "scale_block" in attrs else data.shape
                values = _fp8_table(attrs["dtype"])[data] * expand_scales(
                    np.asarray(scales, dtype=np.float64).reshape(
                        [n // b for n, b in zip(data.shape, block)]), block, data.shape)
            elif attrs["dtype"] == "bf16":
                values = (data.astype(np.uint32) << 16).view(np.float32)
            else:
                values = data
            found[(attrs["name"], attrs["kind"], int(attrs["index"]))] = (attrs, values)
    return found


class OperandsTest(unittest.TestCase):
    def test_the_gemm_operands_are_recorded_as_the_gemm_read_them(self):
        cases = {"fp8 tensorwise": (lambda: float8_model("tensorwise"), None),
                 "fp8 rowwise": (lambda: float8_model("rowwise"), None),
                 "MXFP8Linear": (mxfp8_model, "e8m0"),
                 "quantize_ MXFP8": (lambda: wrapped_model(MXFP8TrainingOpConfig(
                     kernel_preference=KernelPreference.EMULATED)), "e8m0"),
                 "quantize_ fp8": (lambda: wrapped_model(Float8TrainingOpConfig()), None)}
        for label, (make, scale_format) in cases.items():
            with self.subTest(label), tempfile.TemporaryDirectory() as tmp:
                torch.manual_seed(0)
                model = make().to(torch.bfloat16)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                cap = ttrace.Capture(model, tmp, optimizer=optimizer, dtype_recipe="fp8")
                x = torch.randn(2, 16, 64, dtype=torch.bfloat16)
                model(x).float().square().sum().backward()
                optimizer.step()
                cap.close()
                trace = stored(tmp)
                for name in ("layers.0.up", "layers.0.down"):
                    (a_attrs, a), (b_attrs, b) = (trace[(name, "forward_input", i)]
                                                  for i in (1, 2))
                    self.assertEqual(a_attrs["dtype"], "fp8_e4m3")
                    self.assertEqual(b_attrs["dtype"], "fp8_e4m3")
                    self.assertEqual(a_attrs.get("scale_format"), scale_format)
                    # the input as the GEMM takes it, [tokens, in], the weight: [in, out]
                    self.assertEqual(a.shape, (32, trace[(name, "forward_input", 0)][1].shape[-1]))
                    self.assertEqual(b.shape, tuple(reversed(
                        getattr(model.layers[0], name.split(".")[-1]).weight.shape)))
                    # the operands reproduce the module's output: the GEMM read these words
                    # and scales (its fp32 sums may add in another order: a bf16 step)
                    out = trace[(name, "forward_output", 0)][1].reshape(32, -1)
                    np.testing.assert_allclose((a @ b).astype(np.float32), out, rtol=2.0**-7,
                                               atol=1e-6)
                    # and a quantization of their own, in fp8 steps: not the bf16 input
                    self.assertGreater(np.abs(a - trace[(name, "forward_input", 0)][1].reshape(
                        a.shape)).max(), 0)
                self.assertNotIn(("layers.0.up", "forward_input", 3), trace)
                # the backward's GEMMs, after the module's one output: 1, 2 grad_input's (the
                # output gradient, the weight as [out, in]), 3, 4 grad_weight's (the output
                # gradient transposed, the input); they reproduce the gradients they made
                grad_format = "fp8_e5m2" if label == "fp8 tensorwise" else "fp8_e4m3"
                for name in ("layers.0.up", "layers.0.down"):
                    g1, w, g3, a = (trace[(name, "output_grad", i)] for i in (1, 2, 3, 4))
                    self.assertEqual([g1[0]["dtype"], w[0]["dtype"], g3[0]["dtype"],
                                      a[0]["dtype"]],
                                     [grad_format, "fp8_e4m3", grad_format, "fp8_e4m3"])
                    weight = getattr(model.layers[0], name.split(".")[-1]).weight
                    self.assertEqual(w[1].shape, tuple(weight.shape))
                    self.assertEqual(g3[1].shape, tuple(reversed(g1[1].shape)))
                    self.assertEqual(a[1].shape, trace[(name, "forward_input", 1)][1].shape)
                    self.assertLess(trace[(name, "output_grad", 0)][0]["seq"], g1[0]["seq"])
                    grad_weight = trace[(f"{name}.weight", "param_grad", 0)][1]
                    np.testing.assert_allclose((g3[1] @ a[1]).astype(np.float32), grad_weight,
                                               rtol=2.0**-7, atol=1e-5)
                    # a quantization of the output gradient, in fp8 steps
                    self.assertGreater(np.abs(g1[1] - trace[(name, "output_grad", 0)][1].reshape(
                        g1[1].shape)).max(), 0)
                # grad_input of `down` (its input needs one; the model's does not)
                g1, w = (trace[("layers.0.down", "output_grad", i)][1] for i in (1, 2))
                np.testing.assert_allclose(
                    (g1 @ w).astype(np.float32),
                    trace[("layers.0.down", "input_grad", 0)][1].reshape(32, 128),
                    rtol=2.0**-7, atol=1e-5)
                self.assertNotIn(("layers.0.up", "output_grad", 5), trace)
                # tensorwise casts the output gradients to e5m2: the manifest says so
                with open(os.path.join(tmp, "manifest.json")) as f:
                    dtype = json.load(f)["dtype"]
                self.assertEqual(dtype.get("grad_operands"),
                                 "fp8_e5m2" if label == "fp8 tensorwise" else None, dtype)

    def test_activation_checkpointing_records_the_same_backward_operands(self):
        """Recomputing a checkpointed block's forward inside the backward (non-reentrant, as
        torchtitan's; and reentrant) runs that forward's GEMMs inside a linear's backward:
        they are not its backward's operands, whether or not the capture hooks their modules.
        Each run records what a run without checkpointing records, bit for bit."""
        def run(folder, checkpoint, modules=None):
            torch.manual_seed(0)
            model = float8_model("rowwise").to(torch.bfloat16)
            if checkpoint is not None:
                block = model.layers[0]
                forward = block.forward
                block.forward = lambda x: torch.utils.checkpoint.checkpoint(
                    forward, x, use_reentrant=checkpoint)
            cap = ttrace.Capture(model, folder, iterations=[0], dtype_recipe="fp8",
                                 modules=modules)
            x = torch.randn(2, 16, 64, dtype=torch.bfloat16,
                            generator=torch.Generator().manual_seed(3), requires_grad=True)
            with cap.step(0):
                model(x).float().square().sum().backward()
            cap.close()
            return {key: values for key, (attrs, values) in stored(folder).items()
                    if key[1] == "output_grad" and key[2] > 0}

        with tempfile.TemporaryDirectory() as tmp:
            plain = run(os.path.join(tmp, "plain"), None)
            self.assertEqual(len(plain), 8)
            for reentrant, modules in ((False, None), (True, None), (False, ["layers.0.down"])):
                checkpointed = run(os.path.join(tmp, f"checkpointed-{reentrant}-{modules}"),
                                   reentrant, modules)
                expected = {key: values for key, values in plain.items()
                            if modules is None or key[0] in modules}
                self.assertEqual(sorted(checkpointed), sorted(expected), (reentrant, modules))
                for key, values in expected.items():
                    np.testing.assert_array_equal(checkpointed[key], values,
                                                  err_msg=f"{key} reentrant={reentrant}")

    def test_outside_captured_iterations_nothing_is_watched(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = float8_model("tensorwise").to(torch.bfloat16)
            cap = ttrace.Capture(model, tmp, iterations=[1], dtype_recipe="fp8")
            with cap.step(0):
                model(torch.randn(32, 64, dtype=torch.bfloat16))
                self.assertEqual(cap._operand_modes, [])
            with cap.step(1):
                with self.assertRaises(ZeroDivisionError):
                    with mock.patch.object(torch, "relu",
                                           side_effect=ZeroDivisionError):
                        model(torch.randn(32, 64, dtype=torch.bfloat16))
                # a forward that raised leaves no mode behind
                self.assertEqual(cap._operand_modes, [])
            cap.close()


    def test_a_reordered_perturbed_reference_records_the_operands_in_the_reference_order(self):
        """A perturbed reference that runs its samples in another order records the GEMMs'
        [tokens, features] views of a [batch, sequence, features] input or output gradient
        (and the backward's [features, tokens] one) in the reference's order, their scales
        with them (per row, per column, MX blocks of 32 tokens within a sample): unperturbed,
        bit for bit the reference's. Blocks that span samples cannot be put back: said."""
        order = [3, 1, 0, 2]

        def run(folder, make, x, rows, **kw):
            torch.manual_seed(0)
            model = make().to(torch.bfloat16)
            cap = ttrace.Capture(model, folder, iterations=[0], dtype_recipe="fp8", **kw)
            with cap.step(0):
                model(x[rows]).float().square().sum().backward()
            cap.close()
            with h5py.File(os.path.join(folder, "rank00000.h5")) as f:
                return {(ds.attrs["name"], ds.attrs["kind"], int(ds.attrs["index"])):
                        (ds[()], f["scale_inv"][key][()])
                        for key, ds in f["tensors"].items() if ds.attrs["index"] > 0}

        for label, make, sequence in (("fp8 rowwise", lambda: float8_model("rowwise"), 8),
                                      ("MXFP8Linear", mxfp8_model, 32)):
            x = torch.randn(4, sequence, 64, dtype=torch.bfloat16,
                            generator=torch.Generator().manual_seed(2))
            with self.subTest(label), tempfile.TemporaryDirectory() as tmp:
                ref = run(os.path.join(tmp, "ref"), make, x, [0, 1, 2, 3])
                pert = run(os.path.join(tmp, "pert"), make, x, order,
                           role="perturbed-reference", perturbation={"relative": 0.0, "seed": 0},
                           sample_order=order)
                self.assertEqual(sorted(ref), [
                    (name, kind, i) for name in ("layers.0.down", "layers.0.up")
                    for kind, n in (("forward_input", 2), ("output_grad", 4))
                    for i in range(1, n + 1)])
                self.assertEqual(ref[("layers.0.up", "forward_input", 1)][0].shape,
                                 (4 * sequence, 64))
                self.assertEqual(ref[("layers.0.up", "output_grad", 3)][0].shape,
                                 (128, 4 * sequence))
                for key in ref:
                    for mine, theirs in zip(pert[key], ref[key]):
                        np.testing.assert_array_equal(mine, theirs, err_msg=str(key))
        with tempfile.TemporaryDirectory() as tmp:  # two MX blocks of 32 tokens, 4 samples each
            x, eight = torch.randn(8, 8, 64, dtype=torch.bfloat16), [7, 6, 5, 4, 3, 2, 1, 0]
            with self.assertRaisesRegex(ValueError, "span several samples"):
                run(tmp, mxfp8_model, x, eight, role="perturbed-reference",
                    perturbation={"relative": 0.0, "seed": 0}, sample_order=eight)


class OperandLayoutTest(unittest.TestCase):
    """Where a GEMM's flattened or transposed view of a piece sits in the global tensor."""

    def test_flattened_leading_dimensions(self):
        full = torch.arange(2 * 8 * 4).reshape(2, 8, 4)
        cases = [  # (piece, its layout): a data-parallel half, a sequence half, the whole
            (full[1:], Layout((2, 8, 4), [[(1, 2)], [(0, 8)], [(0, 4)]], {"dp": "Shard(0)"})),
            (full[:, 4:], Layout((2, 8, 4), [[(0, 2)], [(4, 8)], [(0, 4)]], {"tp": "Shard(1)"})),
            (full, Layout((2, 8, 4), None, {"tp": "Replicate"})),
        ]
        for piece, layout in cases:
            flat = flattened(layout, 2)
            self.assertEqual(flat.global_shape, (16, 4))
            rows = (range(16) if flat.ranges is None else
                    [i for a, b in flat.ranges[0] for i in range(a, b)])
            self.assertTrue(torch.equal(full.reshape(16, 4)[list(rows)], piece.reshape(-1, 4)),
                            layout)
        self.assertEqual(flattened(cases[1][1], 2).ranges[0], [(4, 8), (12, 16)])
        self.assertEqual(flattened(cases[1][1], 2).placements, {"tp": "Shard(0)"})
        self.assertEqual(flattened(Layout((4, 6), None, {"dp": "Shard(1)"}), 1).placements,
                         {"dp": "Shard(1)"})
        self.assertIsNone(flattened(Layout((4, 6, 2), None, {"dp": "_StridedShard(dim=0, sf=2)"}),
                                    2))

    def test_transposed(self):
        layout = Layout((8, 6), [[(0, 4)], [(0, 6)]], {"tp": "Shard(0)", "dp": "Replicate"})
        self.assertEqual(transposed(layout), Layout((6, 8), [[(0, 6)], [(0, 4)]],
                                                    {"tp": "Shard(1)", "dp": "Replicate"}))


# -- tensor parallelism by torchao's own plan --------------------------------------------------

def _amax_of_the_shard(x, reduce_amax=False, device_mesh=None, scaling_granularity=None,
                       axiswise_dim=None):
    """The bug: a tensorwise scale from this rank's shard alone, not reduced over TP (and
    said to be replicated, as torchao's own amax of a DTensor is)."""
    amax = torch.max(torch.abs(x.to_local() if isinstance(x, DTensor) else x))
    if not isinstance(x, DTensor):
        return amax
    return DTensor.from_local(amax, x.device_mesh, [Replicate()] * x.device_mesh.ndim,
                              run_check=False)


def run(rank, world, folder, role, bug, recipe="tensorwise"):
    """One rank of a run of the toy model in torchao's fp8 `recipe` ("tensorwise": torchao's
    float8 TP plan; "mxfp8": MXFP8Linear, its first linear column-parallel by torch's own style
    with its output gathered, which torchao's MX GEMMs support on DTensors)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
    from torchao.float8.float8_tensor_parallel import (Float8ColwiseParallel,
                                                       Float8RowwiseParallel)

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = (mxfp8_model() if recipe == "mxfp8" else float8_model(recipe)).to(torch.bfloat16)
    perturbation = None
    if role == "perturbed-reference":
        perturbation = {"relative": ttrace.unit_roundoff(torch.bfloat16), "seed": 1}
        for i, p in enumerate(model.parameters()):
            ttrace.perturb_(p.data, seed=1 + i)
    mesh = None
    if role == "distributed":
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
        plan = {"layers.0.up": ColwiseParallel(output_layouts=Replicate())} \
            if recipe == "mxfp8" else {"layers.0.up": Float8ColwiseParallel(),
                                       "layers.0.down": Float8RowwiseParallel()}
        parallelize_module(model, mesh, plan)
    x = torch.randn(32, 64, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    cap = ttrace.Capture(model, folder, role=role, mesh=mesh, optimizer=optimizer,
                         dtype_recipe="fp8", perturbation=perturbation)
    with mock.patch("torchao.float8.float8_utils.tensor_to_amax", _amax_of_the_shard) \
            if bug else mock.patch.dict({}):
        model(x).float().square().sum().backward()
    optimizer.step()
    cap.close()


class TensorParallelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.checker = os.environ.get("TTRACE_CHECK")
        if not cls.checker:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        cls.tmp = tempfile.TemporaryDirectory(prefix="ttrace-torchao-training-")
        for role in ("reference", "perturbed-reference"):
            run_ranks(1, run, cls.folder(role), role, False)
        for bug in (False, True):
            run_ranks(2, run, cls.folder(f"distributed-{bug}"), "distributed", bug)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def folder(cls, name):
        return os.path.join(cls.tmp.name, name)

    def check(self, bug):
        report = self.folder(f"report-{bug}.json")
        done = subprocess.run(
            [self.checker, self.folder(f"distributed-{bug}"), self.folder("reference"),
             "--perturbed", self.folder("perturbed-reference"), "--no-cache", "--json",
             report], capture_output=True, text=True)
        with open(report) as f:
            return done, json.load(f)

    def operands(self, report, kind="forward_input"):
        """(module, index) -> the report's result of each `kind` held in fp8."""
        return {(t["key"]["name"], t["key"]["index"]): t for t in report["tensors"]
                if t["dtype"].startswith("fp8") and t["key"]["kind"] == kind}

    def test_the_shards_carry_the_whole_tensors_scale(self):
        for rank in range(2):
            trace = stored(self.folder("distributed-False"), rank)
            self.assertEqual(
                {key: json.loads(a["placements"]) for key, (a, _) in trace.items()
                 if key[1] == "forward_input" and key[2] > 0},
                {("layers.0.up", "forward_input", 1): {"tp": "Replicate"},
                 ("layers.0.up", "forward_input", 2): {"tp": "Shard(1)"},
                 ("layers.0.down", "forward_input", 1): {"tp": "Shard(1)"},
                 ("layers.0.down", "forward_input", 2): {"tp": "Shard(0)"}}, rank)
            # the backward's: grad_output [tokens, out] and the weight [out, in], then
            # grad_output transposed and the input [tokens, in]
            self.assertEqual(
                {key: json.loads(a["placements"]) for key, (a, _) in trace.items()
                 if key[1] == "output_grad" and key[2] > 0},
                {("layers.0.up", "output_grad", 1): {"tp": "Shard(1)"},
                 ("layers.0.up", "output_grad", 2): {"tp": "Shard(0)"},
                 ("layers.0.up", "output_grad", 3): {"tp": "Shard(0)"},
                 ("layers.0.up", "output_grad", 4): {"tp": "Replicate"},
                 ("layers.0.down", "output_grad", 1): {"tp": "Replicate"},
                 ("layers.0.down", "output_grad", 2): {"tp": "Shard(1)"},
                 ("layers.0.down", "output_grad", 3): {"tp": "Replicate"},
                 ("layers.0.down", "output_grad", 4): {"tp": "Shard(1)"}}, rank)
            self.assertEqual(trace[("layers.0.up", "output_grad", 1)][0]["dtype"], "fp8_e5m2")
            # torchao's parallel styles hand the linears their inputs already in fp8 (gathered
            # so), where the reference's are bf16: judged no finer than e4m3's rounding
            self.assertEqual(trace[("layers.0.up", "forward_input", 0)][0]["dtype"], "fp8_e4m3")
        done, report = self.check(False)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertTrue(report["coverage"]["complete"], report["coverage"])
        # the summary counts them: the GEMM operands' scales checked, those of the inputs
        # gathered in fp8 not (the reference holds them in bf16)
        quantized = [line for line in done.stdout.splitlines()
                     if line.strip().startswith("quantized tensors:")]
        self.assertEqual(len(quantized), 1, done.stdout)
        self.assertRegex(quantized[0], r"quantized tensors: +\d+ fp8 per tensor; \d+ fp8 not "
                                       r"checked \(their scales checked")
        self.assertTrue(any("computed in fp8_e4m3 in the distributed run but in bf16" in
                            d["message"] for d in report["diagnostics"]), report["diagnostics"])
        operands = self.operands(report)
        self.assertEqual(set(operands), {(name, i) for name in ("layers.0.up", "layers.0.down")
                                         for i in (0, 1, 2)})
        for key, tensor in operands.items():
            if key[1] > 0:
                self.assertEqual(tensor["fp8_scales"]["max_difference"], 0, key)
        backward = self.operands(report, "output_grad")
        self.assertEqual({key for key in backward if key[1] > 0},
                         {(name, i) for name in ("layers.0.up", "layers.0.down")
                          for i in (1, 2, 3, 4)})
        for key, tensor in backward.items():
            if key[1] > 0:
                self.assertEqual(tensor["fp8_scales"]["max_difference"], 0, key)

    def test_a_scale_from_a_shards_own_amax_is_found(self):
        done, report = self.check(True)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertEqual(report["verdict"], "bug")
        operands = self.operands(report)
        # the column-parallel input is whole on every rank: its scale is right
        self.assertEqual(operands[("layers.0.up", 1)]["fp8_scales"]["max_difference"], 0)
        for key in (("layers.0.up", 2), ("layers.0.down", 1), ("layers.0.down", 2)):
            self.assertGreater(operands[key]["fp8_scales"]["max_difference"], 0, key)
        # in the backward too: the column-parallel output gradient's scale from its shard
        backward = self.operands(report, "output_grad")
        self.assertGreater(backward[("layers.0.up", 1)]["fp8_scales"]["max_difference"], 0)
        self.assertEqual(backward[("layers.0.up", 4)]["fp8_scales"]["max_difference"], 0)
        first = report["tensors"][report["localization"]["first_faulty"]["result"]]["key"]
        self.assertEqual((first["name"], first["kind"], first["index"]),
                         ("layers.0.up", "forward_input", 2), first)


class MXTensorParallelTest(unittest.TestCase):
    """torchao's MXFP8Linear under tensor parallelism makes MX tensors of DTensors (words and
    scales each a DTensor): recorded with the words' placements and the shard's scales, forward
    and backward, and checked clean against a reference on one device."""

    def test_mx_tensors_of_dtensors(self):
        checker = os.environ.get("TTRACE_CHECK")
        if not checker:
            self.skipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        with tempfile.TemporaryDirectory(prefix="ttrace-mx-tp-") as tmp:
            folder = lambda name: os.path.join(tmp, name)  # noqa: E731
            for role in ("reference", "perturbed-reference"):
                run_ranks(1, run, folder(role), role, False, "mxfp8")
            run_ranks(2, run, folder("distributed"), "distributed", False, "mxfp8")
            for rank in range(2):
                trace = stored(folder("distributed"), rank)
                placements = {key: json.loads(a["placements"]) for key, (a, _) in trace.items()
                              if key[0] == "layers.0.up" and key[2] > 0}
                self.assertEqual(placements, {
                    ("layers.0.up", "forward_input", 1): {"tp": "Replicate"},
                    ("layers.0.up", "forward_input", 2): {"tp": "Shard(1)"},
                    ("layers.0.up", "output_grad", 1): {"tp": "Shard(1)"},
                    ("layers.0.up", "output_grad", 2): {"tp": "Shard(0)"},
                    ("layers.0.up", "output_grad", 3): {"tp": "Shard(0)"},
                    ("layers.0.up", "output_grad", 4): {"tp": "Replicate"}}, rank)
                attrs, weight = trace[("layers.0.up", "forward_input", 2)]
                # the shard's half of the weight, [in, out / 2], its scales per 32 down a column
                self.assertEqual(weight.shape, (64, 64))
                self.assertEqual(tuple(attrs["scale_block"]), (32, 1))
            report = folder("report.json")
            done = subprocess.run(
                [checker, folder("distributed"), folder("reference"), "--perturbed",
                 folder("perturbed-reference"), "--no-cache", "--json", report],
                capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            with open(report) as f:
                checked = json.load(f)
            self.assertTrue(checked["coverage"]["complete"])
            # the MX operands' scales are E8M0 as captured: the recipe is named MXFP8
            formats = {t["fp8_scales"]["reference_scale_format"]
                       for t in checked["tensors"] if t["fp8_scales"]}
            self.assertEqual(formats, {"e8m0"})


if __name__ == "__main__":
    unittest.main()
