"""examples/inject.py (the error injector of examples/sensitivity.py) on the bundled clean
sample (bf16, pp2_tp2_sp): the chosen shard's stored values change by the requested relative
delta on every copy (or on one), nothing else changes, and the source folder is untouched."""

import hashlib
import os
import sys
import tempfile
import unittest

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE = os.path.join(ROOT, "resources", "samples", "clean", "dist")
sys.path[:0] = [os.path.join(ROOT, "examples")]
import inject  # noqa: E402

ACTIVATION = inject.Key("layers.0.attn.core", "forward_output", 0, 0, 0)  # split over tp
# the tied embedding weight: on both pipeline stages, each TP half twice
TIED = inject.Key("embedding.weight", "param_grad", 0, 0, -1)


def digest(folder):
    h = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            h.update(name.encode() + f.read())
    return h.hexdigest()


def values(folder, piece):
    with h5py.File(os.path.join(folder, piece.file), "r") as h5:
        return inject._decode(h5["tensors"][piece.dataset][...], piece.dtype)


class InjectTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pieces = inject.index_trace(SOURCE)
        cls.before = digest(SOURCE)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dst = os.path.join(self.tmp.name, "injected")

    def tearDown(self):
        self.tmp.cleanup()
        self.assertEqual(digest(SOURCE), self.before, "the source folder was written")

    def assertScaled(self, piece, delta, dtype_resolution):
        old, new = values(SOURCE, piece), values(self.dst, piece)
        nonzero = old != 0
        self.assertTrue(nonzero.any())
        ratio = new[nonzero] / old[nonzero] - 1
        # each value rounds to the stored type: within one half unit in the last place
        np.testing.assert_allclose(ratio, delta, atol=3 * dtype_resolution)

    def assertSame(self, piece):
        np.testing.assert_array_equal(values(SOURCE, piece), values(self.dst, piece))

    def test_a_shard_on_one_rank(self):
        inj = inject.Injection(ACTIVATION, 0.05, rank=1)
        inject.inject(SOURCE, self.dst, [inj], self.pieces)
        self.assertEqual([p.rank for p in inj.pieces], [1])
        resolution = inject.RESOLUTION[inj.pieces[0].dtype]
        self.assertScaled(inj.pieces[0], 0.05, resolution)
        self.assertAlmostEqual(inj.applied, 0.05, delta=3 * resolution)
        for piece in self.pieces[ACTIVATION]:
            if piece.rank != 1:
                self.assertSame(piece)

    def test_every_copy_of_a_replicated_shard_or_one(self):
        copies = [p for p in self.pieces[TIED] if p.ranges == self.pieces[TIED][0].ranges]
        self.assertEqual(len(copies), 2)
        inj = inject.Injection(TIED, 0.02)
        inject.inject(SOURCE, self.dst, [inj], self.pieces)
        self.assertEqual(inj.pieces, copies)
        for piece in self.pieces[TIED]:
            if piece in copies:
                self.assertScaled(piece, 0.02, inject.RESOLUTION[piece.dtype])
            else:
                self.assertSame(piece)
        one = inject.Injection(TIED, 0.02, rank=copies[-1].rank, copies="one")
        inject.inject(SOURCE, self.dst, [one], self.pieces)
        self.assertEqual(one.pieces, copies[-1:])
        self.assertSame(copies[0])

    def test_a_block_of_elements_on_every_piece_holding_it(self):
        inj = inject.Injection(ACTIVATION, 0.05, block=((0, 1), None, (6, 10)))
        inject.inject(SOURCE, self.dst, [inj], self.pieces)
        for piece in self.pieces[ACTIVATION]:
            old, new = values(SOURCE, piece), values(self.dst, piece)
            columns = inject._global_indices(piece.ranges, old.shape)[2]
            inside = (columns >= 6) & (columns < 10)
            changed = (old != new).any(axis=(1,))
            self.assertFalse((old[1:] != new[1:]).any())
            self.assertTrue(changed[0][inside].any())
            self.assertFalse(changed[0][~inside].any())

    def test_a_delta_below_the_storage_resolution_rounds_away(self):
        inj = inject.Injection(ACTIVATION, inject.RESOLUTION["bf16"] / 2)
        inject.inject(SOURCE, self.dst, [inj], self.pieces)
        self.assertEqual(inj.applied, 0.0)

    def test_fp8_bytes_keep_their_scale_and_saturate(self):
        values_ = np.array([1.0, -2.0, 448.0, 0.0], dtype=np.float64)
        stored = inject.encode(values_, "fp8_e4m3")
        self.assertEqual(stored.dtype, np.uint8)
        np.testing.assert_array_equal(inject._decode(stored, "fp8_e4m3"), values_)
        scaled = inject._decode(inject.encode(values_ * 1.25, "fp8_e4m3"), "fp8_e4m3")
        np.testing.assert_array_equal(scaled, [1.25, -2.5, 448.0, 0.0])  # 560 saturates
        # bf16 spacing at 1 is 2^-7: below half of it down, above it up, ties to even
        words = inject.encode(np.array([1 + 2.0 ** -9, 1 + 3 * 2.0 ** -9, 1 + 2.0 ** -8,
                                         1 + 2.0 ** -7 + 2.0 ** -8]), "bf16")
        np.testing.assert_array_equal(inject._decode(words, "bf16"),
                                      [1.0, 1 + 2.0 ** -7, 1.0, 1 + 2.0 ** -6])


if __name__ == "__main__":
    unittest.main()
