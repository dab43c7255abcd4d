"""Forwards that activation checkpointing runs a second time, during the backward.

torch.utils.checkpoint (reentrant or not), checkpoint_wrapper and selective activation
checkpointing all recompute a module's forward inside the backward pass, where the module's
hooks fire again with the same iteration and micro-batch. The trace keeps the first forward's
tensors; each recomputed one is compared with it bit for bit, on the writer thread: a
recomputation that does not repeat the forward (the RNG state not restored for dropout, an fp8
amax updated twice) is a silent bug of its own. Each rank file says what was compared and what
differed (trace-format.md, `recomputations`)."""

import json
import warnings

import numpy as np
import torch


def in_recomputation():
    """Whether a forward now runs inside a backward pass: a recomputation."""
    return torch._C._current_graph_task_id() != -1


class Recomputations:
    """The first forward's dataset of each key, and what comparing recomputations found. Used
    on the writer thread only."""

    def __init__(self, rank):
        self._rank = rank
        self._first = {}  # (name, kind, index, iteration, micro_batch) -> dataset name
        self.compared = 0
        self.differing = []

    def first(self, key, dataset):
        self._first.setdefault(key, dataset)

    def dataset(self, key):
        """The first forward's dataset of `key`, None when it has none yet."""
        return self._first.get(key)

    def compare(self, key, stored, recomputed, dtype=None):
        """Compares the recomputation `recomputed` of `key` (stored words and fp8 or fp4
        scales, as the trace would store them) with the first forward's, `stored`; `dtype`
        the trace dtype (fp4's bytes hold two elements each, counted apart)."""
        self.compared += 1
        (first_words, first_scales), (words, scales) = stored, recomputed
        if dtype == "fp4_e2m1":
            first_words, words = _nibbles(first_words), _nibbles(words)
        differing = int(np.count_nonzero(_bits(first_words) != _bits(words))) \
            if first_words.shape == words.shape else int(words.size)
        same_scales = (first_scales is None and scales is None) or np.array_equal(
            np.asarray(first_scales, dtype=np.float64), np.asarray(scales, dtype=np.float64))
        if not differing and same_scales:
            return
        name, kind, index, iteration, micro_batch = key
        finding = {"name": name, "kind": kind, "index": index, "iteration": iteration,
                   "micro_batch": micro_batch, "elements_differing": differing,
                   "elements": int(words.size), "scales_differ": not same_scales}
        self.differing.append(finding)
        warnings.warn(
            f"ttrace: rank {self._rank}: {name} {kind}[{index}] (iteration {iteration}, "
            f"micro-batch {micro_batch}) recomputed by activation checkpointing differs from "
            f"its first forward in {differing} of {words.size} elements"
            f"{' and in its quantization scales' if not same_scales else ''}: the recomputation does not "
            "repeat the forward (RNG state not restored? an fp8 scale updated twice?)",
            stacklevel=2)

    def attribute(self):
        """The rank file's `recomputations` attribute (JSON), or None when nothing was
        recomputed."""
        if not self.compared:
            return None
        return json.dumps({"compared": self.compared, "differing": self.differing})


def _nibbles(packed):
    """fp4 bytes as their two 4-bit codes, one element each."""
    packed = np.asarray(packed, dtype=np.uint8)
    return np.stack([packed & 0xF, packed >> 4], axis=-1)


def _bits(words):
    """The stored words as unsigned integers of their width: compared bit for bit, NaN too."""
    words = np.ascontiguousarray(words)
    return words.view(np.dtype(f"u{words.dtype.itemsize}"))
