"""Unit tests of the capture API pieces: layouts, name maps, consistent generation,
perturbation, and a single-process Capture (no torch.distributed needed)."""

import contextlib
import json
import os
import tempfile
import unittest

import h5py
import numpy as np
import torch

import ttrace


class LayoutTest(unittest.TestCase):
    def test_even_shards_nest_in_mesh_order(self):
        mesh = {"pp": 2, "dp": 2, "tp": 2}
        lay = ttrace.even_layout((4, 3), {"dp": "Shard(0)", "tp": "Shard(-1)"}, mesh, [1, 1, 0])
        self.assertEqual(lay.global_shape, (8, 6))
        self.assertEqual(lay.ranges, [[(4, 8)], [(0, 3)]])
        # pp is left out: a stage owns its layers
        self.assertEqual(lay.placements, {"dp": "Shard(0)", "tp": "Shard(1)"})
        both = ttrace.even_layout((2,), {"dp": "Shard(0)", "tp": "Shard(0)"}, mesh, [0, 1, 1])
        self.assertEqual(both.global_shape, (8,))
        self.assertEqual(both.ranges, [[(6, 8)]])

    def test_megatron_stride(self):
        lay = ttrace.even_layout((12, 8), {"tp": "Shard(0)"}, {"tp": 2}, [1], {"tp": 3})
        self.assertEqual(lay.ranges[0], [(4, 8), (12, 16), (20, 24)])

    def test_zigzag_context_parallel_chunks(self):
        self.assertEqual(ttrace.zigzag_ranges(8, 0, 2), [(0, 2), (6, 8)])
        self.assertEqual(ttrace.zigzag_ranges(8, 1, 2), [(2, 4), (4, 6)])
        mesh = {"dp": 2, "cp": 2, "tp": 2}
        spec = {"dp": "Shard(0)", "cp": "Shard(1)", "tp": "Shard(2)"}
        lay = ttrace.even_layout((2, 4, 3), spec, mesh, [1, 0, 1], zigzag=("cp",))
        self.assertEqual(lay.global_shape, (4, 8, 6))
        self.assertEqual(lay.ranges, [[(2, 4)], [(0, 2), (6, 8)], [(3, 6)]])
        self.assertEqual(lay.placements, spec)
        # the chunks of a zig-zag shard tile the sequence exactly once
        covered = sorted(r for i in range(4) for r in ttrace.zigzag_ranges(16, i, 4))
        self.assertEqual(covered, [(2 * c, 2 * c + 2) for c in range(8)])
        with self.assertRaises(ValueError):
            ttrace.zigzag_ranges(6, 0, 2)

    def test_replicate_partial_and_size_one_axes(self):
        lay = ttrace.even_layout((3,), {"tp": "Partial(sum)"}, {"dp": 2, "cp": 1, "tp": 2}, [0, 0, 1])
        self.assertEqual(lay.placements, {"dp": "Replicate", "tp": "Partial(sum)"})
        self.assertIsNone(lay.ranges)
        with self.assertRaises(ValueError):
            ttrace.even_layout((3,), {"tp": "Shard(2)"}, {"tp": 2}, [0])
        with self.assertRaises(ValueError):
            ttrace.even_layout((3,), {"tp": "Sharded"}, {"tp": 2}, [0])

    def test_layer_offset(self):
        m = ttrace.layer_offset(4)
        self.assertEqual(m("layers.0.fc1.weight"), "layers.4.fc1.weight")
        self.assertEqual(m("decoder.layers.3"), "decoder.layers.7")
        self.assertEqual(m("head.weight"), "head.weight")
        self.assertEqual(ttrace.default_layer_of("decoder.layers.12.mlp"), 12)
        self.assertEqual(ttrace.default_layer_of("head"), -1)


class ConsistentTest(unittest.TestCase):
    def test_shards_are_slices_of_the_global_tensor(self):
        full = ttrace.consistent_randn((6, 4), seed=3)
        part = ttrace.consistent_randn((6, 4), 3, (slice(2, 4), slice(None)))
        torch.testing.assert_close(part, full[2:4], rtol=0, atol=0)
        zigzag = ttrace.consistent_randn((6, 4), 3, [[(0, 1), (5, 6)], [(1, 3)]])
        torch.testing.assert_close(zigzag, full[[0, 5]][:, 1:3], rtol=0, atol=0)
        self.assertFalse(torch.equal(full, ttrace.consistent_randn((6, 4), seed=4)))

    def test_perturbation_is_round_off_sized(self):
        x = ttrace.consistent_randn((1000,), 1, dtype=torch.float64)
        y = ttrace.perturb_(x.clone(), relative=1e-3, seed=5)
        rel = ((y - x) / x).abs()
        self.assertLessEqual(rel.max().item(), 1e-3 * (1 + 1e-9))
        self.assertGreater(rel.max().item(), 0.9e-3)
        self.assertEqual(ttrace.unit_roundoff(torch.bfloat16), 2.0**-8)
        self.assertEqual(ttrace.unit_roundoff(torch.float32), 2.0**-24)
        z = ttrace.perturb_(ttrace.consistent_randn((1000,), 1), seed=5)
        self.assertGreater((z - ttrace.consistent_randn((1000,), 1)).abs().max().item(), 0)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = layer(torch.relu(x))  # the last module output is the model output
        return x


class CaptureTest(unittest.TestCase):
    def run_tiny(self, folder, dtype=torch.float32, **kw):
        torch.manual_seed(0)
        model = Tiny().to(dtype)
        outputs = []
        cap = ttrace.Capture(model, folder, iterations=[1], **kw)
        for it in range(2):
            with cap.step(it):
                cap.record_params()
                with cap.micro_batch(0):
                    out = model(torch.ones(2, 4, dtype=dtype, requires_grad=True))
                    outputs.append(out.detach().clone())
                    out.sum().backward()
                cap.record_param_grads()
                cap.record_updated_params()
        cap.close()
        with h5py.File(os.path.join(folder, "rank00000.h5")) as f:
            return [(dict(ds.attrs), ds[()]) for ds in f["tensors"].values()], outputs

    def test_a_module_named_twice_is_recorded_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            once, _ = self.run_tiny(os.path.join(tmp, "once"), modules=["layers.0"])
            twice, _ = self.run_tiny(os.path.join(tmp, "twice"),
                                     modules=["layers.0", "layers.1", "layers.0"])
        key = lambda attrs: (attrs["name"], attrs["kind"], int(attrs["micro_batch"]))  # noqa: E731
        module_tensors = [key(a) for a, _ in twice if a["name"] == "layers.0"
                          and a["kind"] in ("forward_input", "forward_output")]
        self.assertEqual(len(module_tensors), len(set(module_tensors)))
        self.assertEqual(sorted(module_tensors),
                         sorted(key(a) for a, _ in once if a["name"] == "layers.0"
                                and a["kind"] in ("forward_input", "forward_output")))

    def test_records_only_chosen_iterations_with_global_names(self):
        with tempfile.TemporaryDirectory() as tmp:
            tensors, _ = self.run_tiny(tmp, name_map=ttrace.layer_offset(2))
            with open(os.path.join(tmp, "manifest.json")) as f:
                manifest = json.load(f)
        self.assertEqual(manifest["capture"]["iterations"], [1])
        self.assertEqual({int(a["iteration"]) for a, _ in tensors}, {1})
        names = [(a["name"], a["kind"]) for a, _ in tensors]
        self.assertEqual(names[:4], [("layers.2.weight", "param"), ("layers.2.bias", "param"),
                                     ("layers.3.weight", "param"), ("layers.3.bias", "param")])
        forward = [n for n in names if n[1] in ("forward_input", "forward_output")]
        self.assertEqual(forward, [("layers.2", "forward_input"), ("layers.2", "forward_output"),
                                   ("layers.3", "forward_input"), ("layers.3", "forward_output")])
        backward = [n for n in names if n[1] in ("output_grad", "input_grad")]
        self.assertEqual(backward, [("layers.3", "output_grad"), ("layers.3", "input_grad"),
                                    ("layers.2", "output_grad"), ("layers.2", "input_grad")])
        self.assertEqual([int(a["layer"]) for a, _ in tensors[:4]], [2, 2, 3, 3])
        self.assertEqual([int(a["seq"]) for a, _ in tensors], list(range(len(tensors))))

    def test_bf16_is_stored_as_bit_patterns(self):
        with tempfile.TemporaryDirectory() as tmp:
            tensors, outputs = self.run_tiny(tmp, dtype=torch.bfloat16, dtype_recipe="bf16")
        attrs, data = next(t for t in tensors if t[0]["name"] == "layers.1"
                           and t[0]["kind"] == "forward_output")
        self.assertEqual(attrs["dtype"], "bf16")
        self.assertEqual(data.dtype, np.uint16)
        expected = outputs[1].view(torch.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(data, expected)

    def test_fp8_tensors_are_stored_as_bytes_with_their_scale(self):
        scaled = torch.tensor([[448.0, -1.0, 0.5, 3.0], [2.0, -448.0, 0.0, 0.1]])
        with tempfile.TemporaryDirectory() as tmp:
            cap = ttrace.Capture(Tiny(), tmp, iterations=[0], dtype_recipe="fp8")
            with cap.step(0):
                self.assertTrue(cap.record_fp8("layers.0", "forward_input", 1, scaled, 0.25))
            with cap.step(1):  # not captured
                self.assertFalse(cap.record_fp8("layers.0", "forward_input", 1, scaled, 0.25))
            cap.close()
            with h5py.File(os.path.join(tmp, "rank00000.h5")) as f:
                (ds,) = f["tensors"].values()
                attrs, data = dict(ds.attrs), ds[()]
        self.assertEqual((attrs["dtype"], attrs["kind"], int(attrs["index"])),
                         ("fp8_e4m3", "forward_input", 1))
        self.assertEqual(attrs["scale_inv"], 0.25)
        self.assertEqual(data.dtype, np.uint8)
        decoded = ttrace.writer._fp8_table("fp8_e4m3")[data] * attrs["scale_inv"]
        # on the E4M3 grid except 0.1, which rounds to the nearest fp8 value (0.1015625)
        expected = scaled.numpy().astype(np.float64) * 0.25
        expected[1, 3] = 0.1015625 * 0.25
        np.testing.assert_array_equal(decoded, expected)

    def test_torch_fp8_tensors_are_stored_bit_for_bit(self):
        e4m3 = torch.tensor([[448.0, -1.0, 0.5, 3.0], [2.0, -448.0, 0.0, 0.1]]).to(
            torch.float8_e4m3fn)
        e5m2 = torch.tensor([57344.0, -0.25, 1e-5, 3.0]).to(torch.float8_e5m2)

        class Quantizer(torch.nn.Module):  # a module whose output is fp8: no scale
            def forward(self, x):
                return x.to(torch.float8_e5m2)

        model = torch.nn.Sequential(Quantizer())
        with tempfile.TemporaryDirectory() as tmp:
            cap = ttrace.Capture(model, tmp, iterations=[0], dtype_recipe="fp8")
            with cap.step(0):
                cap.record_fp8("0", "forward_input", 1, e4m3, 0.25)
                cap.record_fp8("0", "forward_input", 2, e5m2, 2.0)
                model(torch.tensor([1.0, -3.5]))
            cap.close()
            with h5py.File(os.path.join(tmp, "rank00000.h5")) as f:
                stored = {(ds.attrs["kind"], int(ds.attrs["index"])): (dict(ds.attrs), ds[()])
                          for ds in f["tensors"].values()}
        attrs, data = stored[("forward_input", 1)]
        self.assertEqual((attrs["dtype"], attrs["scale_inv"]), ("fp8_e4m3", 0.25))
        np.testing.assert_array_equal(data, e4m3.view(torch.uint8).numpy())
        attrs, data = stored[("forward_input", 2)]
        self.assertEqual((attrs["dtype"], attrs["scale_inv"]), ("fp8_e5m2", 2.0))
        np.testing.assert_array_equal(data, e5m2.view(torch.uint8).numpy())
        attrs, data = stored[("forward_output", 0)]
        self.assertEqual((attrs["dtype"], attrs["scale_inv"]), ("fp8_e5m2", 1.0))
        np.testing.assert_array_equal(
            data, torch.tensor([1.0, -3.5]).to(torch.float8_e5m2).view(torch.uint8).numpy())
        # the trace's decoding table gives torch's values back
        decoded = ttrace.writer._fp8_table("fp8_e4m3")[stored[("forward_input", 1)][1]]
        np.testing.assert_array_equal(decoded, e4m3.float().numpy())

    def test_fp8_scales_per_row_and_per_block(self):
        """Row-wise scales ([rows, 1], as torch._scaled_mm takes them) and 2 x 4 blocks of a
        5 x 6 operand (a 3 x 2 grid, the last blocks cut short) are stored as scale_block and
        the /scale_inv dataset, and every byte decodes through its own block's scale."""
        torch.manual_seed(0)
        x = torch.randn(5, 6)
        row_scale = x.abs().amax(dim=1, keepdim=True) / 448
        rows = (x / row_scale).to(torch.float8_e4m3fn)
        block_scale = torch.tensor([[0.5, 0.25], [1.0, 2.0], [4.0, 0.125]])
        blocks = (x / block_scale.repeat_interleave(2, 0).repeat_interleave(4, 1)[:5, :6]).to(
            torch.float8_e4m3fn)
        with tempfile.TemporaryDirectory() as tmp:
            cap = ttrace.Capture(Tiny(), tmp, iterations=[0], dtype_recipe="fp8")
            with cap.step(0):
                cap.record_fp8("layers.0", "forward_input", 1, rows, row_scale)
                # the block scales are powers of two: MX's E8M0, said so
                cap.record_fp8("layers.0", "forward_input", 2, blocks, block_scale, block=(2, 4),
                               scale_format="e8m0")
                with self.assertRaisesRegex(ValueError, "not an e8m0 scale"):
                    cap.record_fp8("layers.0", "forward_input", 3, rows, row_scale,
                                   scale_format="e8m0")
                with self.assertRaisesRegex(ValueError, "blocks of .* tile shape"):
                    cap.record_fp8("layers.0", "forward_input", 3, blocks, block_scale,
                                   block=(4, 4))
                with self.assertRaisesRegex(ValueError, "in as many dimensions"):
                    cap.record_fp8("layers.0", "forward_input", 3, rows, row_scale.flatten())
            cap.close()
            with h5py.File(os.path.join(tmp, "rank00000.h5")) as f:
                stored = {int(ds.attrs["index"]): (dict(ds.attrs), ds[()], f["scale_inv"][k][()])
                          for k, ds in f["tensors"].items()}
        table = ttrace.writer._fp8_table("fp8_e4m3")
        for index, fp8, scales, block in ((1, rows, row_scale, (1, 6)),
                                          (2, blocks, block_scale, (2, 4))):
            attrs, data, stored_scales = stored[index]
            self.assertNotIn("scale_inv", attrs)
            self.assertEqual(tuple(attrs["scale_block"]), block)
            self.assertEqual(attrs.get("scale_format"), "e8m0" if index == 2 else None)
            np.testing.assert_array_equal(stored_scales, scales.double().numpy())
            np.testing.assert_array_equal(data, fp8.view(torch.uint8).numpy())
            decoded = table[data] * ttrace.writer.expand_scales(stored_scales, block, data.shape)
            expected = fp8.double() * scales.double().repeat_interleave(block[0], 0)\
                .repeat_interleave(block[1], 1)[:5, :6]
            np.testing.assert_array_equal(decoded, expected.numpy())

    def test_a_tensor_is_stored_as_it_was_when_recorded(self):
        """The copy is taken when the tensor is recorded (ttrace.staging): parameters updated
        in place afterwards, and fp8 scales changed afterwards, are stored as they were; stats
        count the writer's wait for copies in flight (none on the CPU)."""
        model = Tiny()
        before = model.layers[0].weight.detach().clone()
        scales = torch.tensor([[0.5], [0.25]])
        values = torch.full((2, 4), 2.0).to(torch.float8_e4m3fn)
        with tempfile.TemporaryDirectory() as tmp:
            cap = ttrace.Capture(model, tmp, iterations=[0], dtype_recipe="fp8")
            with cap.step(0):
                cap.record_params()
                cap.record_fp8("layers.0", "forward_input", 1, values, scales)
                with torch.no_grad():
                    model.layers[0].weight.add_(1.0)
                scales.mul_(4.0)
            cap.close()
            self.assertIn("seconds_waiting_for_copies", cap.stats)
            with h5py.File(os.path.join(tmp, "rank00000.h5")) as f:
                by_name = {(ds.attrs["name"], int(ds.attrs["index"])): k
                           for k, ds in f["tensors"].items()}
                weight = f["tensors"][by_name[("layers.0.weight", 0)]][()]
                stored_scales = f["scale_inv"][by_name[("layers.0", 1)]][()]
        np.testing.assert_array_equal(weight, before.numpy())
        np.testing.assert_array_equal(stored_scales, [[0.5], [0.25]])

    def test_fp4_native_and_simulated(self):
        """record_fp4: a torch.float4_e2m1fn_x2 tensor is stored bit for bit, a float one
        already divided by its scales is rounded to e2m1 and packed the same way; the e4m3
        block scales and the fp32 tensor scale are kept as given, and a block scale e4m3
        cannot hold is refused in the training's thread."""
        codes = torch.arange(32, dtype=torch.uint8).reshape(2, 16) % 16
        packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()
        native = packed.view(torch.float4_e2m1fn_x2)
        self.assertEqual(tuple(native.shape), (2, 8))
        values = torch.from_numpy(ttrace.writer.unpack_fp4(packed.numpy())).float()
        scales = torch.tensor([[1.0], [0.375]])
        with tempfile.TemporaryDirectory() as tmp:
            cap = ttrace.Capture(Tiny(), tmp, iterations=[0], dtype_recipe="fp4")
            with cap.step(0):
                cap.record_fp4("layers.0", "forward_input", 1, native, scales, block=(1, 16),
                               scale_format="e4m3", tensor_scale_inv=0.25)
                cap.record_fp4("layers.0", "forward_input", 2, values * 1.01, scales,
                               block=(1, 16), scale_format="e4m3", tensor_scale_inv=0.25)
                with self.assertRaisesRegex(ValueError, "not an e4m3 scale"):
                    cap.record_fp4("layers.0", "forward_input", 3, values, scales * 1.0625,
                                   scale_format="e4m3")
                with self.assertRaisesRegex(ValueError, "has no even one"):
                    cap.record_fp4("layers.0", "forward_input", 3, values[:, :15], scales)
            cap.close()
            with h5py.File(os.path.join(tmp, "rank00000.h5")) as f:
                stored = {int(ds.attrs["index"]): (dict(ds.attrs), ds[()], f["scale_inv"][k][()])
                          for k, ds in f["tensors"].items()}
            with open(os.path.join(tmp, "manifest.json")) as f:
                self.assertEqual(json.load(f)["dtype"], {"recipe": "fp4", "compute": "bf16"})
        self.assertEqual(sorted(stored), [1, 2])
        for attrs, data, stored_scales in stored.values():
            self.assertEqual(attrs["dtype"], "fp4_e2m1")
            self.assertEqual(tuple(attrs["global_shape"]), (2, 16))
            self.assertEqual(attrs["tensor_scale_inv"], 0.25)
            np.testing.assert_array_equal(stored_scales, scales.double().numpy())
            np.testing.assert_array_equal(data, packed.numpy())


    def train_tiny(self, folder, follow, interleaved=False):
        """Three SGD steps of two micro-batches each, iterations 0 and 2 captured, either
        following the optimizer or with the explicit calls. interleaved: both forwards before
        both backwards, as a 1F1B pipeline schedule runs them."""
        torch.manual_seed(0)
        model = Tiny()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = [torch.linspace(-1, 1, 8).reshape(2, 4) * (m + 1) for m in range(2)]
        if follow:
            cap = ttrace.Capture(model, folder, iterations=[0, 2], optimizer=opt)
        else:
            cap = ttrace.Capture(model, folder, iterations=[0, 2], micro_batches=2)
        for it in range(3):
            with contextlib.nullcontext() if follow else cap.step(it):
                if not follow:
                    cap.record_params()
                outputs = []
                for m, x in enumerate(batches):
                    with contextlib.nullcontext() if follow else cap.micro_batch(m):
                        outputs.append(model(x.requires_grad_()).square().sum())
                        if not interleaved:
                            outputs.pop().backward()
                for out in outputs:
                    out.backward()
                if not follow:
                    cap.record_param_grads()
                opt.step()
                opt.zero_grad()
                if not follow:
                    cap.record_updated_params()
        if follow:  # the explicit mode refuses to be mixed in
            with self.assertRaises(RuntimeError), cap.step(0):
                pass
        cap.close()
        with open(os.path.join(folder, "manifest.json")) as f:
            manifest = json.load(f)
        with h5py.File(os.path.join(folder, "rank00000.h5")) as f:
            tensors = [({k: ds.attrs[k] for k in ("name", "kind", "index", "iteration",
                                                   "micro_batch")}, ds[()])
                       for ds in f["tensors"].values()]
        return manifest, tensors

    def test_following_the_optimizer_records_what_the_explicit_calls_record(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            explicit_manifest, explicit = self.train_tiny(a, follow=False)
            manifest, followed = self.train_tiny(b, follow=True)
        self.assertEqual(manifest["capture"], explicit_manifest["capture"])
        self.assertEqual(manifest["capture"]["micro_batches"], 2)  # as many as it saw
        self.assertEqual(len(followed), len(explicit))
        self.assertEqual({int(a["iteration"]) for a, _ in followed}, {0, 2})
        for (attrs, data), (want, expected) in zip(followed, explicit):
            self.assertEqual({k: str(v) for k, v in attrs.items()},
                             {k: str(v) for k, v in want.items()})
            np.testing.assert_array_equal(data, expected)

    def test_backward_after_the_next_forward_keeps_its_micro_batch(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            _, sequential = self.train_tiny(a, follow=True)
            _, interleaved = self.train_tiny(b, follow=True, interleaved=True)

        def by_key(tensors):
            return {tuple(str(v) for v in attrs.values()): data for attrs, data in tensors}

        got, want = by_key(interleaved), by_key(sequential)
        self.assertEqual(sorted(got), sorted(want))
        for key, data in want.items():
            np.testing.assert_allclose(got[key], data, rtol=1e-6, err_msg=str(key))

    def test_a_reordered_perturbed_reference_records_in_the_reference_order(self):
        """A perturbed reference that processes its samples in another order (sample_order)
        records its activations, and fp8 scales per sample, in the reference's order: without
        a perturbation they equal the reference's bit for bit, while the parameter gradients
        are sums over the samples in another order."""
        torch.manual_seed(0)
        x = torch.randn(3, 4)
        operand = torch.randn(3, 4)
        order = [2, 0, 1]

        def run(folder, role, rows, **kw):
            torch.manual_seed(1)
            model = Tiny()
            cap = ttrace.Capture(model, folder, role=role, iterations=[0], **kw)
            with cap.step(0):
                cap.record_params()
                with cap.micro_batch(0):
                    model(x[rows].requires_grad_()).pow(2).sum().backward()
                    scale = operand[rows].abs().amax(dim=1, keepdim=True) / 448
                    cap.record_fp8("layers.0", "forward_input", 1,
                                   (operand[rows] / scale).to(torch.float8_e4m3fn), scale)
                cap.record_param_grads()
            cap.close()
            with h5py.File(os.path.join(folder, "rank00000.h5")) as f:
                tensors = {(ds.attrs["name"], ds.attrs["kind"], int(ds.attrs["index"])): ds[()]
                           for ds in f["tensors"].values()}
                scales = f["scale_inv"][list(f["scale_inv"])[0]][()]
            with open(os.path.join(folder, "manifest.json")) as f:
                return tensors, scales, json.load(f)

        with tempfile.TemporaryDirectory() as tmp:
            ref, ref_scales, _ = run(os.path.join(tmp, "ref"), "reference", [0, 1, 2])
            pert, pert_scales, manifest = run(
                os.path.join(tmp, "pert"), "perturbed-reference", order,
                perturbation={"relative": 0.0, "seed": 0}, sample_order=order)
            with self.assertRaisesRegex(ValueError, "perturbed reference only"):
                ttrace.Capture(Tiny(), os.path.join(tmp, "r"), sample_order=order)
            with self.assertRaisesRegex(ValueError, "not a permutation"):
                ttrace.Capture(Tiny(), os.path.join(tmp, "p"), role="perturbed-reference",
                               perturbation={"relative": 0.0, "seed": 0}, sample_order=[0, 0])
        self.assertEqual(manifest["perturbation"]["sample_order"], order)
        self.assertEqual(set(ref), set(pert))
        activations = [k for k in ref if k[1] in ("forward_input", "forward_output",
                                                   "output_grad", "input_grad")]
        self.assertEqual(len(activations), 9)  # 2 modules x 4 kinds + the fp8 operand
        for key in activations:
            np.testing.assert_array_equal(pert[key], ref[key], err_msg=str(key))
        np.testing.assert_array_equal(pert_scales, ref_scales)
        for key in (k for k in ref if k[1] == "param_grad"):
            np.testing.assert_allclose(pert[key], ref[key], rtol=1e-5, err_msg=str(key))

    def test_rejects_inconsistent_arguments(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(ValueError):
                ttrace.Capture(Tiny(), tmp, role="perturbed-reference")
            with self.assertRaises(ValueError):
                ttrace.Capture(Tiny(), tmp, role="distributed", world_size=4, mesh={"tp": 2})
            with self.assertRaises(ValueError):
                ttrace.Capture(Tiny(), tmp, placements={"tp": "Shard(0)"})
            with self.assertRaisesRegex(ValueError, "on one device"):
                ttrace.Capture(Tiny(), tmp, role="perturbed-reference", mesh={"dp": 2},
                               perturbation={"relative": 1e-7, "seed": 1}, sample_order=[1, 0])


if __name__ == "__main__":
    unittest.main()
