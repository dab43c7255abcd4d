#!/usr/bin/env python3
"""Damaged copies of the bundled samples, for screenshots of what the window says about them
(scripts/screenshots.sh): OUT/unreadable_rank_file, the row_bias_every_rank sample with one
rank file of its distributed run cut to half its size, and OUT/blind_tensor, the clean sample
with its perturbed reference's effect on one activation raised to a fifth of the tensor, so
that its threshold (8 e_pert) is above 1: compared, but blind.

Usage: damage-samples.py OUT   (needs h5py and numpy: the project's .venv)"""

import os
import shutil
import sys

import h5py
import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SAMPLES = os.path.join(ROOT, "resources", "samples")
BLINDED = ("layers.0.attn.proj", "forward_output", 0, 0)  # name, kind, iteration, micro-batch


def copy_sample(name, out):
    shutil.copytree(os.path.join(SAMPLES, name), out, symlinks=False)
    return out


def cut_rank_file(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def bf16_values(words):
    return (words.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def bf16_words(values):
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def dataset_of(f, name, kind, iteration, micro_batch):
    for key, d in f["tensors"].items():
        a = d.attrs
        if (a["name"], a["kind"], int(a["iteration"]), int(a["micro_batch"])) == (
                name, kind, iteration, micro_batch):
            return d
    raise LookupError(f"{name} {kind} not in {f.filename}")


def blind_one_tensor(sample):
    with h5py.File(os.path.join(sample, "ref", "rank00000.h5"), "r") as ref, \
            h5py.File(os.path.join(sample, "pert", "rank00000.h5"), "r+") as pert:
        r = bf16_values(dataset_of(ref, *BLINDED)[()])
        d = dataset_of(pert, *BLINDED)
        p = bf16_values(d[()])
        e_pert = np.linalg.norm(p - r) / np.linalg.norm(r)
        d[...] = bf16_words(r + (0.2 / e_pert) * (p - r))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    unreadable = copy_sample("row_bias_every_rank", os.path.join(out, "unreadable_rank_file"))
    cut_rank_file(os.path.join(unreadable, "dist", "rank00001.h5"))
    blind_one_tensor(copy_sample("clean", os.path.join(out, "blind_tensor")))


if __name__ == "__main__":
    main()
