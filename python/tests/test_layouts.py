"""Layouts derived without a callback: a small Transformer parallelized by PyTorch's own plans
(parallelize_module with ColwiseParallel, RowwiseParallel, SequenceParallel,
PrepareModuleInput, default use_local_output; fully_shard; both on one 2-D mesh whose data
axis has one rank, as torchtitan lays out TP-only runs), captured with the three documented
lines, checked by the real ttrace-check against single-device runs of the same model: every
tensor is compared and nothing is flagged."""

import json
import os
import subprocess
import tempfile
import unittest
import warnings

import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               RowwiseParallel, SequenceParallel,
                                               parallelize_module)

import ttrace
from distributed import run_ranks

DIM, HIDDEN, VOCAB, SEQ, BATCH = 16, 32, 24, 8, 4


class Heads(nn.Module):
    """Works on the hidden units split into heads: a view of another shape, which the capture
    cannot place."""

    def forward(self, x):
        return x * 1.0


class Mlp(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.fc1 = nn.Linear(DIM, HIDDEN)
        self.act = nn.GELU()  # no style: between a column- and a row-parallel linear
        self.heads = Heads() if heads else None
        self.drop = nn.Dropout(0.0)
        self.fc2 = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        h = self.act(self.fc1(x))
        if self.heads is not None:
            h = self.heads(h.unflatten(-1, (-1, 4))).flatten(-2)
        return self.fc2(self.drop(h))


class Block(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.mlp = Mlp(heads)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Model(nn.Module):
    """Token and (with `positions`) position embeddings, two blocks, a norm, the logits."""

    def __init__(self, positions, heads=False):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM) if positions else None  # [seq, dim]: no batch
        self.layers = nn.ModuleList([Block(heads), Block(heads)])
        self.norm = nn.LayerNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        h = self.tok(tokens)
        if self.pos is not None:
            h = h + self.pos(torch.arange(tokens.shape[1]))
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def tensor_parallel(model, mesh, sp):
    """torchtitan's plan for a dense model, on the `tp` mesh."""
    stream = Shard(1) if sp else Replicate()
    top = {"tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=stream),
           "output": ColwiseParallel(input_layouts=stream, output_layouts=Replicate())}
    if sp:
        top["norm"] = SequenceParallel()
    parallelize_module(model, mesh, top)
    for block in model.layers:
        plan = {"mlp": PrepareModuleInput(input_layouts=(stream,),
                                          desired_input_layouts=(Replicate(),)),
                "mlp.fc1": ColwiseParallel(),
                "mlp.fc2": RowwiseParallel(output_layouts=stream)}
        if sp:
            plan["norm"] = SequenceParallel()
        parallelize_module(block, mesh, plan)


def run(rank, world, folder, role, layout):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Model(positions=layout["positions"], heads=layout.get("heads", False))
    if role == "perturbed-reference":
        for i, p in enumerate(model.parameters()):
            ttrace.perturb_(p.data, seed=1 + i)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    mesh = None
    if role == "distributed":
        mesh = init_device_mesh("cpu", layout["mesh"], mesh_dim_names=("dp", "tp"))
        if mesh["tp"].size() > 1:
            tensor_parallel(model, mesh["tp"], layout["sp"])
        if layout["fsdp"]:
            for block in model.layers:
                fully_shard(block, mesh=mesh["dp"])
            fully_shard(model, mesh=mesh["dp"])
            for module in model.modules():  # the loss is a sum over every sample: sum grads
                if hasattr(module, "set_gradient_divide_factor"):
                    module.set_gradient_divide_factor(1.0)
                    module.set_force_sum_reduction_for_comms(True)  # gloo has no PREMUL_SUM
        dp = mesh.get_coordinate()[0]
        per = BATCH // mesh["dp"].size()
        tokens = tokens[dp * per:(dp + 1) * per]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    perturbation = {"relative": ttrace.unit_roundoff(torch.float32), "seed": 1} if role == "perturbed-reference" else None
    # the three lines
    cap = ttrace.Capture(model, folder, role=role, mesh=mesh, optimizer=optimizer,
                         perturbation=perturbation)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(tokens).sum().backward()
        optimizer.step()
    cap.close()
    said = [str(w.message) for w in caught if "ttrace" in str(w.message)]
    if role == "distributed" and layout.get("heads"):
        assert any(w.startswith("ttrace: cannot derive the layout of layers.0.mlp.heads "
                                "forward_input[0], a plain tensor of shape [4, 8, 4, 4] inside "
                                "a model-parallel region") and "Capture(placements=...)" in w
                   for w in said), said
    else:
        assert not said, said


LAYOUTS = {
    "tp2": {"mesh": (1, 2), "sp": False, "fsdp": False, "positions": True},
    "tp2_sp": {"mesh": (1, 2), "sp": True, "fsdp": False, "positions": False},
    "fsdp2": {"mesh": (2, 1), "sp": False, "fsdp": True, "positions": True},
    "fsdp1_tp2_sp": {"mesh": (1, 2), "sp": True, "fsdp": True, "positions": False},
    "tp2_heads": {"mesh": (1, 2), "sp": False, "fsdp": False, "positions": False,
                  "heads": True},
}


class DerivedLayoutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.check = os.environ.get("TTRACE_CHECK")
        if not cls.check:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")

    def check_layout(self, name):
        layout = LAYOUTS[name]
        with tempfile.TemporaryDirectory() as tmp:
            folders = {role: os.path.join(tmp, role)
                       for role in ("distributed", "reference", "perturbed-reference")}
            run_ranks(2, run, folders["distributed"], "distributed", layout)
            for role in ("reference", "perturbed-reference"):  # forked, as the job's ranks
                run_ranks(1, run, folders[role], role, layout)
            with open(os.path.join(folders["distributed"], "manifest.json")) as f:
                manifest = json.load(f)
            self.assertEqual(manifest["parallel"]["sp"], layout["sp"], manifest["parallel"])
            self.assertEqual(manifest["model"]["num_layers"], 2, manifest["model"])
            report = os.path.join(tmp, "report.json")
            done = subprocess.run(
                [self.check, folders["distributed"], folders["reference"], "--perturbed",
                 folders["perturbed-reference"], "--no-cache", "--json", report],
                capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            with open(report) as f:
                coverage = json.load(f)["coverage"]
            self.assertTrue(coverage["complete"], coverage)
            self.assertEqual(coverage["not_comparable"], 0, coverage)
            self.assertEqual(coverage["compared"], coverage["reference_tensors"], coverage)

    def test_a_layout_it_cannot_derive_is_named_while_it_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            run_ranks(2, run, os.path.join(tmp, "distributed"), "distributed",
                      LAYOUTS["tp2_heads"])

    def test_tensor_parallel_plan(self):
        self.check_layout("tp2")

    def test_sequence_parallel_plan(self):
        self.check_layout("tp2_sp")

    def test_fsdp2_with_an_activation_without_batch_dimension(self):
        self.check_layout("fsdp2")

    def test_fsdp2_over_tensor_parallel_on_a_mesh_with_a_dimension_of_one(self):
        self.check_layout("fsdp1_tp2_sp")


if __name__ == "__main__":
    unittest.main()
