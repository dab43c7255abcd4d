"""Round trips through the trace writer (python/ttrace/writer.py) and the fixture generator
(tests/data/make_fixtures.py), reading the real HDF5 files back with h5py."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

from ttrace import rewrite
from ttrace.writer import TraceWriter, encode, expand_scales, unpack_fp4

try:
    import torch
except ImportError:  # the bf16 comparison needs torch; everything else does not
    torch = None

MAKE_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "make_fixtures.py")


def read_manifest(folder):
    with open(os.path.join(folder, "manifest.json")) as f:
        return json.load(f)


def datasets(folder, rank=0):
    """{(name, kind, iteration, micro_batch): (attrs, stored array)} of one rank file."""
    out = {}
    with h5py.File(os.path.join(folder, f"rank{rank:05d}.h5"), "r") as f:
        for ds in f["tensors"].values():
            a = dict(ds.attrs)
            out[(a["name"], a["kind"], int(a["iteration"]), int(a["micro_batch"]))] = (a, ds[...])
    return out


def decode(attrs, stored):
    """float64 values of a stored dataset (fp32 or bf16)."""
    if attrs["dtype"] == "bf16":
        return (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return stored.astype(np.float64)


def fp8_decode(bits, fmt):
    """Independent OCP FP8 decoder: float64 value of each bit pattern."""
    bits = np.asarray(bits, dtype=np.int64)
    exp_bits, man_bits, bias = (4, 3, 7) if fmt == "fp8_e4m3" else (5, 2, 15)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    e = (bits >> man_bits) & ((1 << exp_bits) - 1)
    m = (bits & ((1 << man_bits) - 1)).astype(np.float64)
    normal = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    subnormal = m * 2.0 ** (1 - bias - man_bits)
    value = sign * np.where(e == 0, subnormal, normal)
    if fmt == "fp8_e4m3":
        return np.where((e == 15) & (m == 7), np.nan, value)
    return np.where(e == 31, np.where(m == 0, sign * np.inf, np.nan), value)


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()


class ManifestTest(TempDirTest):
    def test_distributed_manifest_round_trip(self):
        folder = os.path.join(self.tmp, "dist")
        coords = {r: [r // 2, r % 2] for r in range(4)}
        with TraceWriter(
            folder,
            role="distributed",
            world_size=4,
            parallel={"tp": 2, "dp": 2, "sp": True},
            mesh_axes=["dp", "tp"],
            mesh_shape=[2, 2],
            rank_coords=coords,
            dtype={"recipe": "bf16", "compute": "bf16", "params": "fp32"},
            model={"name": "tiny", "num_layers": 3},
            capture={"iterations": [0, 1], "micro_batches": 2},
        ) as w:
            for r in range(4):
                w.add(r, "layers.0.fc1", "forward_output", np.zeros((2, 2)))
        m = read_manifest(folder)
        self.assertEqual(m["format"], "ttrace")
        self.assertEqual(m["format_version"], "1.0")
        self.assertEqual(m["role"], "distributed")
        self.assertEqual(m["capture_tool"], {"name": "ttrace-python", "version": "0.1.0"})
        self.assertEqual(m["world_size"], 4)
        self.assertEqual(m["parallel"], {"tp": 2, "pp": 1, "vpp": 1, "dp": 2, "cp": 1, "ep": 1, "sp": True})
        self.assertEqual(m["mesh"], {"axes": ["dp", "tp"], "shape": [2, 2]})
        self.assertEqual(
            m["ranks"], [{"rank": r, "file": f"rank{r:05d}.h5", "coords": coords[r]} for r in range(4)]
        )
        self.assertEqual(m["dtype"], {"recipe": "bf16", "compute": "bf16", "params": "fp32"})
        self.assertEqual(m["model"], {"name": "tiny", "num_layers": 3})
        self.assertEqual(m["capture"], {"iterations": [0, 1], "micro_batches": 2})
        self.assertNotIn("perturbation", m)
        for r in range(4):
            with h5py.File(os.path.join(folder, m["ranks"][r]["file"]), "r") as f:
                self.assertEqual(f.attrs["format_version"], "1.0")
                self.assertEqual(int(f.attrs["rank"]), r)
                self.assertIn("tensors", f)

    def test_finished_rank_is_closed(self):
        folder = os.path.join(self.tmp, "dist")
        with TraceWriter(folder, role="distributed", world_size=2) as w:
            w.add(0, "layers.0.fc1", "forward_output", np.ones((2, 2)))
            w.finish_rank(0)
            # Closed: readable before the writer closes, and no longer written to.
            with h5py.File(os.path.join(folder, "rank00000.h5"), "r") as f:
                self.assertEqual(len(f["tensors"]), 1)
            with self.assertRaises(ValueError):
                w.add(0, "layers.0.fc2", "forward_output", np.ones((2, 2)))
            w.add(1, "layers.0.fc1", "forward_output", np.ones((2, 2)))
        self.assertEqual([r["rank"] for r in read_manifest(folder)["ranks"]], [0, 1])

    def test_reference_defaults_and_perturbation(self):
        ref = os.path.join(self.tmp, "ref")
        with TraceWriter(ref) as w:
            w.add(0, "embedding", "forward_output", np.ones(3))
        m = read_manifest(ref)
        self.assertEqual(m["role"], "reference")
        self.assertEqual(m["world_size"], 1)
        self.assertEqual(m["mesh"], {"axes": [], "shape": []})
        self.assertEqual(m["ranks"], [{"rank": 0, "file": "rank00000.h5", "coords": []}])
        self.assertEqual(set(v for k, v in m["parallel"].items() if k != "sp"), {1})
        self.assertIs(m["parallel"]["sp"], False)

        pert = os.path.join(self.tmp, "pert")
        with TraceWriter(pert, role="perturbed-reference", perturbation={"relative": 2.0**-8, "seed": 7}) as w:
            w.add(0, "embedding", "forward_output", np.ones(3))
        m = read_manifest(pert)
        self.assertEqual(m["role"], "perturbed-reference")
        self.assertEqual(m["perturbation"], {"relative": 2.0**-8, "seed": 7})

    def test_rejects_unknown_names(self):
        with self.assertRaises(ValueError):
            TraceWriter(os.path.join(self.tmp, "x"), role="replay")
        with TraceWriter(os.path.join(self.tmp, "y")) as w:
            with self.assertRaises(ValueError):
                w.add(0, "a", "activation", np.zeros(1))
            with self.assertRaises(ValueError):
                w.add(0, "a", "forward_output", np.zeros(1), dtype="fp64")
            # an already-encoded array must have the dtype's storage width
            with self.assertRaises(ValueError):
                w.add(0, "a", "forward_output", np.zeros(2, dtype=np.uint16), dtype="fp32")
            with self.assertRaises(ValueError):
                w.add(0, "a", "forward_output", np.zeros(2, dtype=np.uint8), dtype="bf16")

    def test_no_manifest_after_a_failed_capture(self):
        folder = os.path.join(self.tmp, "failed")
        with self.assertRaises(RuntimeError):
            with TraceWriter(folder) as w:
                w.add(0, "a", "forward_output", np.zeros(2, dtype=np.float32))
                raise RuntimeError("training step failed")
        self.assertFalse(os.path.exists(os.path.join(folder, "manifest.json")))


class AttributeTest(TempDirTest):
    def test_dataset_attributes(self):
        folder = os.path.join(self.tmp, "t")
        ranges = [[(0, 2), (6, 8)], [(4, 8)]]
        placements = {"cp": "Shard(0)", "tp": "Shard(1)", "dp": "Replicate"}
        with TraceWriter(folder, role="distributed", world_size=2, mesh_axes=["tp"], mesh_shape=[2], rank_coords={0: [0], 1: [1]}) as w:
            first = w.add(1, "layers.5.mlp.experts.7.fc1", "forward_output", np.arange(16.0).reshape(4, 4),
                          iteration=3, micro_batch=2, index=1, layer=5, expert=7, global_shape=(8, 8),
                          ranges=ranges, placements=placements)
            second = w.add(1, "layers.5.mlp.fc1.weight", "param_grad", np.ones((2, 2)), micro_batch=4)
            explicit = w.add(1, "layers.5.mlp.fc1.weight", "updated_param", np.ones((2, 2)), seq=10)
            after = w.add(1, "final_norm", "forward_output", np.ones(2))
        self.assertEqual((first, second, explicit, after), ("000000", "000001", "000010", "000011"))
        self.assertFalse(os.path.exists(os.path.join(folder, "rank00000.h5")))
        with h5py.File(os.path.join(folder, "rank00001.h5"), "r") as f:
            ds = f["tensors/000000"]
            a = ds.attrs
            self.assertEqual(ds.dtype, np.dtype("<f4"))
            np.testing.assert_array_equal(ds[...], np.arange(16.0).reshape(4, 4))
            self.assertEqual(a["name"], "layers.5.mlp.experts.7.fc1")
            self.assertEqual(a["kind"], "forward_output")
            for key, value in (("index", 1), ("iteration", 3), ("micro_batch", 2), ("seq", 0), ("layer", 5), ("expert", 7)):
                self.assertEqual(a[key], value, key)
                self.assertEqual(a[key].dtype, np.int64, key)
            self.assertEqual(a["dtype"], "fp32")
            self.assertEqual(a["global_shape"].dtype, np.int64)
            self.assertEqual(list(a["global_shape"]), [8, 8])
            self.assertEqual(json.loads(a["ranges"]), [[[0, 2], [6, 8]], [[4, 8]]])
            self.assertEqual(json.loads(a["placements"]), placements)
            self.assertNotIn("scale_inv", a)

            grad = f["tensors/000001"].attrs
            self.assertEqual(grad["micro_batch"], -1)  # parameter kinds have no micro-batch
            self.assertEqual((grad["layer"], grad["expert"]), (-1, -1))
            self.assertEqual(list(grad["global_shape"]), [2, 2])
            self.assertNotIn("ranges", grad)  # whole tensor
            self.assertNotIn("placements", grad)
            self.assertEqual(f["tensors/000011"].attrs["seq"], 11)

    def test_storage_types(self):
        folder = os.path.join(self.tmp, "t")
        values = np.linspace(-3, 3, 12).reshape(3, 4)
        with TraceWriter(folder) as w:
            for i, dtype in enumerate(("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")):
                w.add(0, f"t{i}", "forward_output", values, dtype=dtype)
            w.add(0, "pre", "forward_output", encode(values, "bf16"), dtype="bf16")
        with h5py.File(os.path.join(folder, "rank00000.h5"), "r") as f:
            t = f["tensors"]
            self.assertEqual([t[k].dtype for k in sorted(t)], [np.dtype(d) for d in ("<f4", "<u2", "<u2", "u1", "u1", "<u2")])
            np.testing.assert_array_equal(t["000001"][...], values.astype(np.float16).view(np.uint16))
            np.testing.assert_array_equal(t["000005"][...], t["000002"][...])  # storage arrays pass through
            for k, fmt, fmax in (("000003", "fp8_e4m3", 448.0), ("000004", "fp8_e5m2", 57344.0)):
                self.assertEqual(t[k].attrs["dtype"], fmt)
                self.assertAlmostEqual(t[k].attrs["scale_inv"], 3.0 / fmax)  # amax / largest finite
                # amax maps exactly onto the largest finite value
                decoded = fp8_decode(t[k][...], fmt) * t[k].attrs["scale_inv"]
                self.assertEqual(decoded.max(), 3.0)
                self.assertEqual(decoded.min(), -3.0)


@unittest.skipIf(torch is None, "torch is not installed")
class Bf16Test(TempDirTest):
    def bits(self, values):
        return encode(values, "bf16").view(np.int16)

    def torch_bits(self, values):
        return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16).view(torch.int16).numpy()

    def test_matches_torch(self):
        rng = np.random.default_rng(1)
        upper = rng.integers(0, 1 << 16, 4096, dtype=np.uint32)
        upper = upper[(upper & 0x7F80) != 0x7F80]  # leave NaN and inf to the dedicated cases
        # exact ties (even and odd upper halves), just below and above a tie, random low halves
        low = np.concatenate([np.full(upper.size, 0x8000), np.full(upper.size, 0x7FFF), np.full(upper.size, 0x8001),
                              rng.integers(0, 1 << 16, upper.size)]).astype(np.uint32)
        words = (np.tile(upper, 4) << 16) | low
        special = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 1e-39, 3.4028235e38, -3.4028235e38, 1.0, 1.00390625, 1.01171875],
                           dtype=np.float32)
        values = np.concatenate([words.view(np.float32), special, rng.standard_normal(1000).astype(np.float32) * 1e3])
        np.testing.assert_array_equal(self.bits(values), self.torch_bits(values))
        # the ties really are there: 1 + 2^-8 rounds down to 1, 1 + 3*2^-8 up to 1 + 2^-6
        self.assertEqual(list(self.bits(np.array([1.00390625, 1.01171875], dtype=np.float32))), [0x3F80, 0x3F82])

    def test_nan(self):
        nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF], dtype=np.uint32).view(np.float32)
        ours = self.bits(nans).view(np.uint16)
        self.assertTrue(np.all(ours == 0x7FC0))
        # torch's vectorized CPU path writes 0xFFFF, its scalar conversion (c10::BFloat16) 0x7FC0;
        # both are NaN, and the scalar one is the canonical pattern the writer uses
        theirs = self.torch_bits(nans).view(np.uint16)
        self.assertTrue(np.all(((theirs & 0x7F80) == 0x7F80) & ((theirs & 0x7F) != 0)))
        script = ("import torch; x = torch.tensor([float('nan'), -float('nan')]); "
                  "print(x.to(torch.bfloat16).view(torch.int16).tolist())")
        env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        self.assertEqual([b & 0xFFFF for b in json.loads(out.stdout)], [0x7FC0, 0x7FC0])

    def test_file_round_trip(self):
        values = np.random.default_rng(2).standard_normal((5, 7)).astype(np.float32)
        values[0, 0] = np.nan
        folder = os.path.join(self.tmp, "t")
        with TraceWriter(folder) as w:
            w.add(0, "x", "forward_output", values, dtype="bf16")
        with h5py.File(os.path.join(folder, "rank00000.h5"), "r") as f:
            stored = f["tensors/000000"][...]
        self.assertEqual(stored.dtype, np.uint16)
        expected = self.torch_bits(values).view(np.uint16)
        expected[0, 0] = 0x7FC0
        np.testing.assert_array_equal(stored, expected)


class Fp16Test(unittest.TestCase):
    def test_matches_numpy(self):
        rng = np.random.default_rng(3)
        values = np.concatenate([rng.standard_normal(1000) * 10.0 ** rng.integers(-8, 6, 1000),
                                 [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e6, 6e-8, 1 + 2.0**-11]])
        with np.errstate(over="ignore"):  # 65520 and 1e6 overflow to inf, on purpose
            np.testing.assert_array_equal(encode(values, "fp16"), values.astype(np.float16).view(np.uint16))
            self.assertEqual(encode(values, "fp16").dtype, np.uint16)


class Fp8Test(unittest.TestCase):
    FORMATS = (("fp8_e4m3", 448.0), ("fp8_e5m2", 57344.0))

    def test_representable_values_are_exact(self):
        for fmt, _ in self.FORMATS:
            for scale_inv in (1.0, 0.375, 2.0**-10):
                codes = np.arange(256)
                values = fp8_decode(codes, fmt)
                finite = np.isfinite(values)
                bits = encode(values[finite] * scale_inv, fmt, scale_inv)
                np.testing.assert_array_equal(bits, codes[finite], f"{fmt} scale {scale_inv}")

    def test_within_half_an_ulp(self):
        rng = np.random.default_rng(4)
        for fmt, fmax in self.FORMATS:
            scale_inv = 0.013
            grid = np.unique(np.abs(fp8_decode(np.arange(256), fmt)))
            grid = grid[np.isfinite(grid)]
            scaled = np.concatenate([rng.uniform(-fmax, fmax, 20000), rng.standard_normal(20000) * 2.0 ** rng.integers(-12, 4, 20000)])
            bits = encode(scaled * scale_inv, fmt, scale_inv)
            self.assertEqual(bits.dtype, np.uint8)
            decoded = fp8_decode(bits, fmt)
            hi = np.clip(np.searchsorted(grid, np.abs(scaled)), 1, grid.size - 1)
            half_ulp = (grid[hi] - grid[hi - 1]) / 2
            err = np.abs(decoded - scaled)
            self.assertTrue(np.all(err <= half_ulp * (1 + 1e-12)), f"{fmt}: worst {np.max(err / half_ulp)} half ulps")
            self.assertTrue(np.all(np.sign(decoded) * np.sign(scaled) >= 0))

    def test_ties_saturation_and_non_finite(self):
        for fmt, fmax in self.FORMATS:
            one_ulp = 2.0**-3 if fmt == "fp8_e4m3" else 2.0**-2  # spacing just above 1
            # halfway between 1 (even mantissa) and 1 + ulp rounds to 1; between 1 + ulp and 1 + 2 ulp up
            ties = np.array([1 + one_ulp / 2, 1 + 1.5 * one_ulp, -(1 + one_ulp / 2)])
            np.testing.assert_array_equal(fp8_decode(encode(ties, fmt), fmt), [1.0, 1 + 2 * one_ulp, -1.0])
            self.assertEqual(fp8_decode(encode(np.array([fmax * 4, -fmax * 4]), fmt), fmt).tolist(), [fmax, -fmax])
            self.assertTrue(np.isnan(fp8_decode(encode(np.array([np.nan]), fmt), fmt)).all())
        self.assertEqual(fp8_decode(encode(np.array([np.inf, -np.inf]), "fp8_e5m2"), "fp8_e5m2").tolist(), [np.inf, -np.inf])

    def test_file_round_trip_with_explicit_scale(self):
        with tempfile.TemporaryDirectory() as tmp:
            values = np.random.default_rng(5).standard_normal((4, 6))
            values[1, 1] = np.nan  # ignored by the automatic scale
            with TraceWriter(tmp) as w:
                w.add(0, "a", "forward_output", values, dtype="fp8_e5m2", scale_inv=0.5)
                w.add(0, "b", "forward_output", values, dtype="fp8_e4m3")
            with h5py.File(os.path.join(tmp, "rank00000.h5"), "r") as f:
                a, b = f["tensors/000000"], f["tensors/000001"]
                self.assertEqual(a.attrs["scale_inv"], 0.5)
                np.testing.assert_array_equal(a[...], encode(values, "fp8_e5m2", 0.5))
                self.assertAlmostEqual(b.attrs["scale_inv"], np.nanmax(np.abs(values)) / 448.0)
                self.assertTrue(np.isnan(fp8_decode(b[1, 1], "fp8_e4m3")))

    def test_block_scales_round_trip_and_decode_per_shard(self):
        """Float values given block scales are quantized block by block; the reader of input
        rewriting decodes any shard of the dataset through the scales of its own elements."""
        values = np.random.default_rng(6).standard_normal((5, 6))
        scales = np.array([[0.5, 0.25], [1.0, 2.0], [4.0, 0.125]]) / 448
        with tempfile.TemporaryDirectory() as tmp:
            with TraceWriter(tmp) as w:
                w.add(0, "a", "forward_input", values, dtype="fp8_e4m3", scale_inv=scales,
                      scale_block=(2, 4))
            with h5py.File(os.path.join(tmp, "rank00000.h5"), "r") as f:
                ds = f["tensors/000000"]
                self.assertNotIn("scale_inv", ds.attrs)
                self.assertEqual(tuple(ds.attrs["scale_block"]), (2, 4))
                np.testing.assert_array_equal(f["scale_inv/000000"][()], scales)
                full = expand_scales(scales, (2, 4), values.shape)
                np.testing.assert_array_equal(ds[()], encode(values, "fp8_e4m3", full))
                ranges = [[(1, 3), (4, 5)], [(2, 6)]]  # zig-zag rows, a box across blocks
                got = rewrite._decode(ds, rewrite.select(ds, ranges), ranges)
                rows, cols = [1, 2, 4], slice(2, 6)
                expected = fp8_decode(ds[()], "fp8_e4m3")[rows, cols] * full[rows, cols]
                np.testing.assert_array_equal(got, expected)


    def test_e8m0_scales_are_held_to_powers_of_two_before_anything_is_written(self):
        """scale_format e8m0 (MX): powers of two are stored with the attribute; another scale,
        or none given, is refused and leaves no dataset behind."""
        values = np.ones((2, 64), dtype=np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            with TraceWriter(tmp) as w:
                w.add(0, "a", "forward_input", values, dtype="fp8_e4m3",
                      scale_inv=np.array([[2.0 ** -9, 1.0], [0.5, 2.0 ** 3]]),
                      scale_block=(1, 32), scale_format="e8m0")
                with self.assertRaisesRegex(ValueError, "0.3 is not an e8m0 scale"):
                    w.add(0, "b", "forward_input", values, dtype="fp8_e4m3",
                          scale_inv=np.array([[1.0, 0.3], [1.0, 1.0]]), scale_block=(1, 32),
                          scale_format="e8m0")
                with self.assertRaisesRegex(ValueError, "needs the recipe's own scale_inv"):
                    w.add(0, "c", "forward_input", values, dtype="fp8_e4m3", scale_format="e8m0")
                with self.assertRaisesRegex(ValueError, "unknown scale_format"):
                    w.add(0, "d", "forward_input", values, dtype="fp8_e4m3", scale_inv=1.0,
                          scale_format="ue4m3")
            with h5py.File(os.path.join(tmp, "rank00000.h5"), "r") as f:
                self.assertEqual(sorted(ds.attrs["name"] for ds in f["tensors"].values()), ["a"])
                self.assertEqual(f["tensors/000000"].attrs["scale_format"], "e8m0")


    def test_fp4_is_packed_two_a_byte_with_two_level_scales(self):
        """fp4 e2m1 (NVFP4): the values rounded to e2m1 in units of their block's e4m3 scale
        times the tensor's fp32 scale, packed two a byte along the last dimension, the first
        in the low nibble; the reader of input rewriting decodes any shard of it."""
        values = np.random.default_rng(7).standard_normal((3, 8))
        scales = np.array([[1.0, 0.5], [448.0, 0.125], [1.125, 3.0]])
        tensor = 2.0 ** -10 * 3
        with tempfile.TemporaryDirectory() as tmp:
            with TraceWriter(tmp) as w:
                w.add(0, "a", "forward_input", values, dtype="fp4_e2m1", scale_inv=scales,
                      scale_block=(1, 4), scale_format="e4m3", tensor_scale_inv=tensor)
                right = dict(dtype="fp4_e2m1", scale_inv=scales, scale_block=(1, 4),
                             tensor_scale_inv=tensor)
                for values_given, changed, message in [
                        (values[:, :7], {"scale_inv": scales[:, :2]}, "no even last dimension"),
                        (values, {"scale_inv": 1.0, "scale_block": None},
                         "scales per-block scales"),
                        (values, {"scale_inv": scales * 1.0625, "scale_format": "e4m3"},
                         "not an e4m3 scale"),
                        (values, {"tensor_scale_inv": -1.0}, "not a positive finite number")]:
                    with self.assertRaisesRegex(ValueError, message):
                        w.add(0, "b", "forward_input", values_given, **{**right, **changed})
                with self.assertRaisesRegex(ValueError, "has no NaN"):
                    w.add(0, "c", "forward_input", np.full((2, 2), np.nan), dtype="fp4_e2m1",
                          scale_inv=1.0)
            with h5py.File(os.path.join(tmp, "rank00000.h5"), "r") as f:
                self.assertEqual(sorted(ds.attrs["name"] for ds in f["tensors"].values()), ["a"])
                ds = f["tensors/000000"]
                self.assertEqual(ds.shape, (3, 4))
                self.assertEqual(tuple(ds.attrs["global_shape"]), (3, 8))
                self.assertEqual(ds.attrs["tensor_scale_inv"], tensor)
                full = expand_scales(scales, (1, 4), values.shape) * tensor
                grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
                scaled = values / full
                nearest = grid[np.abs(np.abs(scaled)[..., None] - grid).argmin(-1)]
                ties = np.isclose(np.abs(np.abs(scaled)[..., None] - grid), 0)
                self.assertFalse(ties.any())  # no ties: the nearest value is the one
                expected = np.copysign(np.minimum(nearest, 6.0), scaled) * full
                np.testing.assert_array_equal(unpack_fp4(ds[()]) * full, expected)
                first = ds[0, 0]
                self.assertEqual(unpack_fp4(np.array([first]))[0], expected[0, 0] / full[0, 0])
                ranges = [[(0, 1), (2, 3)], [(3, 7)]]  # rows 0 and 2, columns across blocks
                got = rewrite._decode(ds, rewrite.select(rewrite._elements(ds), ranges), ranges)
                np.testing.assert_array_equal(got, expected[[0, 2], 3:7])


class FixturesTest(unittest.TestCase):
    """Runs tests/data/make_fixtures.py and checks facts of the catalogue (tests/data/FIXTURES.md)."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.out = cls._tmp.name
        subprocess.run([sys.executable, MAKE_FIXTURES, cls.out], check=True)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.out, *parts)

    def test_every_case_has_three_trace_sets(self):
        cases = ["tp_column", "tp_row", "tp_strided", "sp", "cp_zigzag", "pp_vpp", "dp_microbatch", "ep",
                 "combined", "bug_shard", "bug_replica"]
        for case in cases:
            roles = [read_manifest(self.path(case, s))["role"] for s in ("dist", "ref", "pert")]
            self.assertEqual(roles, ["distributed", "reference", "perturbed-reference"], case)
            dist = read_manifest(self.path(case, "dist"))
            self.assertEqual(int(np.prod(dist["mesh"]["shape"])), dist["world_size"], case)
            for rank in range(dist["world_size"]):
                seqs = [a["seq"] for a, _ in sorted(datasets(self.path(case, "dist"), rank).values(), key=lambda v: v[0]["seq"])]
                self.assertEqual(len(set(seqs)), len(seqs))
        pert = read_manifest(self.path("combined", "pert"))
        self.assertEqual(pert["perturbation"]["relative"], 2.0**-8)
        self.assertEqual(pert["dtype"], {"recipe": "bf16", "compute": "bf16"})

    def test_tp_column_shards_concatenate_to_reference(self):
        ref = datasets(self.path("tp_column", "ref"))
        ranks = [datasets(self.path("tp_column", "dist"), r) for r in range(2)]
        out = ("layers.0.fc1", "forward_output", 0, 0)
        weight = ("layers.0.fc1.weight", "param", 0, -1)
        np.testing.assert_array_equal(np.concatenate([d[out][1] for d in ranks], axis=1), ref[out][1])
        np.testing.assert_array_equal(np.concatenate([d[weight][1] for d in ranks], axis=0), ref[weight][1])
        self.assertEqual(json.loads(ranks[1][out][0]["ranges"]), [[[0, 4]], [[8, 16]]])
        self.assertEqual(json.loads(ranks[1][weight][0]["placements"]), {"tp": "Shard(0)"})
        self.assertEqual([a["kind"] for a, _ in sorted(ranks[0].values(), key=lambda v: v[0]["seq"])],
                         ["forward_input", "param", "forward_output", "output_grad", "input_grad", "param_grad"])

    def test_tp_row_partials_sum_to_reference(self):
        key = ("layers.0.fc2", "forward_output", 0, 0)
        ref = datasets(self.path("tp_row", "ref"))[key][1]
        parts = [datasets(self.path("tp_row", "dist"), r)[key] for r in range(2)]
        self.assertEqual(json.loads(parts[0][0]["placements"]), {"tp": "Partial(sum)"})
        np.testing.assert_array_equal(parts[0][1] + parts[1][1], ref)

    def test_cp_zigzag_ranges(self):
        key = ("layers.0.attn", "forward_output", 0, 0)
        ref = datasets(self.path("cp_zigzag", "ref"))[key][1]
        for rank, chunks in ((0, [[0, 4], [12, 16]]), (1, [[4, 8], [8, 12]])):
            attrs, data = datasets(self.path("cp_zigzag", "dist"), rank)[key]
            self.assertEqual(json.loads(attrs["ranges"]), [[[0, 2]], chunks, [[0, 8]]])
            self.assertEqual(data.shape, (2, 8, 8))
            np.testing.assert_array_equal(data, np.concatenate([ref[:, a:b] for a, b in chunks], axis=1))

    def test_pp_vpp_execution_order(self):
        def order(folder, rank):
            return [(a["name"], a["kind"]) for a, _ in sorted(datasets(folder, rank).values(), key=lambda v: v[0]["seq"])]

        fwd, bwd = "forward_output", "input_grad"
        self.assertEqual(order(self.path("pp_vpp", "dist"), 0),
                         [("layers.0.mlp", fwd), ("layers.2.mlp", fwd), ("layers.2.mlp", bwd), ("layers.0.mlp", bwd)])
        self.assertEqual(order(self.path("pp_vpp", "ref"), 0),
                         [(f"layers.{l}.mlp", fwd) for l in range(4)] + [(f"layers.{l}.mlp", bwd) for l in (3, 2, 1, 0)])

    def test_bug_shard_rank5_differs(self):
        key = ("layers.1.fc1", "forward_output", 0, 1)
        ref = decode(*datasets(self.path("bug_shard", "ref"))[key])
        for rank in range(4, 8):
            attrs, stored = datasets(self.path("bug_shard", "dist"), rank)[key]
            (r0, r1), (c0, c1) = [dim[0] for dim in json.loads(attrs["ranges"])]
            rel = np.linalg.norm(decode(attrs, stored) - ref[r0:r1, c0:c1]) / np.linalg.norm(ref[r0:r1, c0:c1])
            if rank == 5:
                self.assertGreater(rel, 0.2)
            else:
                self.assertLess(rel, 2.0**-7)
        # clean combined: same reference, round-off-sized differences only
        self.assertEqual(datasets(self.path("combined", "ref"))[key][1].tobytes(), datasets(self.path("bug_shard", "ref"))[key][1].tobytes())

    def test_bug_replica_differs_at_one_element(self):
        key = ("layers.0.mlp.weight", "param_grad", 0, -1)
        a = datasets(self.path("bug_replica", "dist"), 0)[key][1]
        b = datasets(self.path("bug_replica", "dist"), 1)[key][1]
        self.assertEqual(list(zip(*np.nonzero(a != b))), [(0, 0)])
        self.assertAlmostEqual(float(b[0, 0]), float(a[0, 0]) * 1.5, places=5)

    def test_bad_inputs(self):
        clean = self.path("tp_column", "dist", "rank00001.h5")
        self.assertLess(os.path.getsize(self.path("bad", "truncated", "rank00001.h5")), os.path.getsize(clean))
        self.assertEqual(os.path.getsize(self.path("bad", "corrupt", "rank00001.h5")), os.path.getsize(clean))
        self.assertFalse(os.path.exists(self.path("bad", "missing_rank", "rank00001.h5")))
        self.assertFalse(os.path.exists(self.path("bad", "no_manifest", "manifest.json")))
        self.assertEqual(read_manifest(self.path("bad", "newer_version"))["format_version"], "2.0")
        with self.assertRaises(json.JSONDecodeError):
            read_manifest(self.path("bad", "manifest_syntax"))
        gap = datasets(self.path("bad", "gap"), 1)[("layers.0.fc1", "forward_output", 0, 0)]
        self.assertEqual((json.loads(gap[0]["ranges"]), gap[1].shape), ([[[0, 4]], [[9, 16]]], (4, 7)))
        stored = datasets(self.path("bad", "dtype_storage"), 0)[("layers.0.fc1", "forward_output", 0, 0)]
        self.assertEqual((stored[0]["dtype"], stored[1].dtype), ("bf16", np.float32))
        ref = datasets(self.path("bad", "ref_missing_tensor"))
        self.assertNotIn(("layers.0.fc1.weight", "param_grad", 0, -1), ref)
        self.assertEqual(len(ref), 5)

    def test_deterministic(self):
        with tempfile.TemporaryDirectory() as again:
            subprocess.run([sys.executable, MAKE_FIXTURES, again], check=True)
            for rank in range(8):
                first = datasets(self.path("combined", "dist"), rank)
                second = datasets(os.path.join(again, "combined", "dist"), rank)
                self.assertEqual(first.keys(), second.keys())
                for key in first:
                    self.assertEqual(first[key][1].tobytes(), second[key][1].tobytes())


if __name__ == "__main__":
    unittest.main()
