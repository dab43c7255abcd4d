"""Routing replay: every run records its routers' top-k choices; a run given a reference trace
takes the reference's experts (sliced to its shard, in its own sample order, the same in a
recomputation) with its own scores of them, and counts the tokens it would have routed
otherwise."""

import json
import os
import subprocess
import unittest

import h5py
import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import ttrace
from distributed import run_ranks, temporary_folder
from test_capture import load

BATCH, SEQ, DIM, EXPERTS, TOP_K = 4, 6, 8, 4, 2
ORDER = [3, 2, 1, 0]  # the perturbed reference's sample order


class Router(nn.Module):
    """torchtitan's way: the experts chosen by the scores plus a bias (its load balancing),
    weighted by the scores alone."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(DIM, EXPERTS, bias=False)
        self.top_k = TOP_K
        self.register_buffer("choice_bias", torch.zeros(EXPERTS))

    def forward(self, x):
        scores = self.gate(x).softmax(-1)
        chosen = torch.topk(scores + self.choice_bias, self.top_k, dim=-1).indices
        return scores.gather(-1, chosen), chosen


class MoE(nn.Module):
    def __init__(self, checkpointed=False):
        super().__init__()
        self.router = Router()
        self.experts = nn.ModuleList([nn.Linear(DIM, DIM) for _ in range(EXPERTS)])
        self.checkpointed = checkpointed

    def forward(self, x):
        if self.checkpointed:
            return checkpoint(self._routed, x, use_reentrant=False)
        return self._routed(x)

    def _routed(self, x):
        weights, chosen = self.router(x)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            out = out + (weights * (chosen == e)).sum(-1, keepdim=True) * expert(x)
        return out


class Model(nn.Module):
    """One mixture of experts; `gate_offset` moves the router's gate so that its own choices
    differ from the unmoved model's."""

    def __init__(self, gate_offset=0.0, checkpointed=False):
        super().__init__()
        torch.manual_seed(0)
        self.moe = MoE(checkpointed)
        with torch.no_grad():
            self.moe.router.gate.weight.add_(gate_offset * torch.randn(EXPERTS, DIM))

    def forward(self, x):
        return self.moe(x)


def micro_batch(m):
    return torch.randn(BATCH, SEQ, DIM, generator=torch.Generator().manual_seed(10 + m),
                       requires_grad=True)


def train(model, folder, rows=slice(None), order=None, **capture):
    """One iteration of two micro-batches (rows `rows` of each, in `order`), captured."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    cap = ttrace.Capture(model, folder, optimizer=optimizer, iterations=[0],
                         sample_order=order, modules=lambda name, module: True, **capture)
    for m in range(2):
        x = micro_batch(m).detach()[rows]
        model(x if order is None else x[order]).sum().backward()
    optimizer.step()
    cap.close()
    return cap


def choices(folder, rank=0):
    """{(name, iteration, micro_batch, call): (experts, attrs)} of a rank file's /routing."""
    with h5py.File(os.path.join(folder, f"rank{rank:05d}.h5"), "r") as f:
        return {(ds.attrs["name"], int(ds.attrs["iteration"]), int(ds.attrs["micro_batch"]),
                 int(ds.attrs["call"])): (ds[()], dict(ds.attrs))
                for ds in f.get("routing", {}).values()}


def router_weights(folder, rank, m):
    """The router's recorded forward_output[0] (its scores of the chosen experts) of
    micro-batch m."""
    _, ranks = load(folder)
    return next(p["data"] for p in ranks[rank] if p["name"] == "moe.router"
                and p["kind"] == "forward_output" and p["index"] == 0 and p["micro_batch"] == m)


def reference(test):
    folder = os.path.join(temporary_folder(test), "ref")
    train(Model(), folder, role="reference")
    return folder


def replaying(rank, world, ref, out):
    """A distributed rank: its rows of each micro-batch, routed by the reference's choices
    (rank 0 writes the reference first)."""
    torch.set_num_threads(1)  # the parent's OpenMP pool does not survive the fork
    if rank == 0:  # one process of the job: a single-device reference says so
        train(Model(), ref, role="reference", rank=0, world_size=1)
    torch.distributed.barrier()
    expected = [choices(ref)[("moe.router", 0, m, 0)][0] for m in range(2)]
    rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    train(Model(gate_offset=1.0), out, rows=rows, role="distributed",
          replay_routing_from=ref)
    torch.distributed.barrier()  # rank 0 has written the manifest
    for m in range(2):
        theirs = torch.from_numpy(expected[m][rows])
        model = Model(gate_offset=1.0)  # its weights before the step: the forward's
        own = model.moe.router.gate(micro_batch(m).detach()[rows]).softmax(-1)
        np.testing.assert_array_equal(router_weights(out, rank, m),
                                      own.gather(-1, theirs).detach().numpy())


class RoutingReplayTest(unittest.TestCase):
    def test_every_run_records_its_choices(self):
        ref = reference(self)
        recorded = choices(ref)
        self.assertEqual(sorted(recorded), [("moe.router", 0, m, 0) for m in range(2)])
        model = Model()
        for m in range(2):
            experts, attrs = recorded[("moe.router", 0, m, 0)]
            own = torch.topk(model.moe.router.gate(micro_batch(m)).softmax(-1), TOP_K).indices
            np.testing.assert_array_equal(experts, own.numpy())
            self.assertEqual(list(attrs["global_shape"]), [BATCH, SEQ, TOP_K])

    def test_a_perturbed_reference_takes_the_references_experts_in_its_own_order(self):
        ref = reference(self)
        out = os.path.join(temporary_folder(self), "pert")
        train(Model(gate_offset=1.0), out, order=ORDER, role="perturbed-reference",
              perturbation={"relative": 1e-3, "seed": 1}, replay_routing_from=ref)
        theirs, mine = choices(ref), choices(out)
        model = Model(gate_offset=1.0)
        differing = 0
        for m in range(2):
            key = ("moe.router", 0, m, 0)
            own = torch.topk(model.moe.router.gate(micro_batch(m)).softmax(-1), TOP_K).indices
            # its own choices, recorded in the reference's order as its activations are
            np.testing.assert_array_equal(mine[key][0], own.numpy())
            differing += int((np.sort(mine[key][0], -1) != np.sort(theirs[key][0], -1))
                             .any(-1).sum())
            # the router's output: its own scores of the reference's experts
            scores = model.moe.router.gate(micro_batch(m)).softmax(-1)
            np.testing.assert_array_equal(
                router_weights(out, 0, m),
                scores.gather(-1, torch.from_numpy(theirs[key][0])).detach().numpy())
        self.assertGreater(differing, 0, "the moved gate must choose otherwise somewhere")
        with open(os.path.join(out, "manifest.json")) as f:
            replay = json.load(f)["capture"]["routing_replay"]
        self.assertEqual(replay["reference"], os.path.abspath(ref))
        counts = {"tokens": 2 * BATCH * SEQ, "differing": differing}
        self.assertEqual(replay["ranks"], [{"rank": 0, "replayed": 2, "not_found": 0, **counts,
                                            "routers": {"moe.router": counts}}])

    def test_distributed_ranks_replay_their_slices(self):
        folder = temporary_folder(self)
        out = os.path.join(folder, "dist")
        run_ranks(2, replaying, os.path.join(folder, "ref"), out)
        with open(os.path.join(out, "manifest.json")) as f:
            ranks = json.load(f)["capture"]["routing_replay"]["ranks"]
        self.assertEqual([(r["rank"], r["replayed"], r["tokens"]) for r in ranks],
                         [(0, 2, BATCH * SEQ), (1, 2, BATCH * SEQ)])
        for rank in range(2):  # each rank's own choice, with its rows' ranges
            attrs = choices(out, rank)[("moe.router", 0, 0, 0)][1]
            self.assertEqual(json.loads(attrs["ranges"])[0], [[rank * 2, rank * 2 + 2]])

    def test_a_recomputation_replays_the_same_experts(self):
        ref = reference(self)
        folder = temporary_folder(self)
        plain, checkpointed = (os.path.join(folder, n) for n in ("plain", "checkpointed"))
        train(Model(gate_offset=1.0), plain, role="perturbed-reference",
              perturbation={"relative": 1e-3, "seed": 1}, replay_routing_from=ref)
        model = Model(gate_offset=1.0, checkpointed=True)
        cap = train(model, checkpointed, role="perturbed-reference",
                    perturbation={"relative": 1e-3, "seed": 1}, replay_routing_from=ref)
        self.assertEqual(cap._routing.counts["replayed"], 2)  # not again in the recomputation
        _, a = load(plain)
        _, b = load(checkpointed)
        grads = lambda ranks: [p["data"] for p in ranks[0] if p["kind"] == "param_grad"]  # noqa
        for x, y in zip(grads(a), grads(b)):  # the backward saw the replayed routing too
            np.testing.assert_array_equal(x, y)
        with h5py.File(os.path.join(checkpointed, "rank00000.h5"), "r") as f:
            self.assertEqual(json.loads(f.attrs["recomputations"])["differing"], [])

    def test_bad_uses_are_named(self):
        with self.assertRaisesRegex(ValueError, "no router"):
            ttrace.Capture(nn.Linear(2, 2), temporary_folder(self), role="reference",
                           replay_routing_from=temporary_folder(self))
        ref = reference(self)
        wide = Model()
        wide.moe.router.top_k = 3  # chooses 3 experts where the reference chose 2
        with self.assertRaisesRegex(ValueError, r"/routing/000000 \(moe.router top-k 0\): "
                                                r"reference shape \(4, 6, 2\) is not this "
                                                r"run's global shape \(4, 6, 3\)"):
            train(wide, os.path.join(temporary_folder(self), "wide"), role="perturbed-reference",
                  perturbation={"relative": 1e-3, "seed": 1}, replay_routing_from=ref)


class RoutingChoiceCheckTest(unittest.TestCase):
    """The checker names a router whose own choices in a replaying run differ from the
    reference's on more tokens than the perturbed reference's round-off flips explain: the
    compared tensors, which follow the reference's experts, cannot show it."""

    @classmethod
    def setUpClass(cls):
        cls.checker = os.environ.get("TTRACE_CHECK")
        if not cls.checker:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")

    def check(self, choice_bias):
        tmp = temporary_folder(self)
        ref, pert, dist = (os.path.join(tmp, n) for n in ("ref", "pert", "dist"))
        train(Model(), ref, role="reference")
        relative = ttrace.unit_roundoff(torch.float32)
        perturbed = Model()
        for i, p in enumerate(perturbed.parameters()):
            ttrace.perturb_(p.data, relative, seed=1 + i)
        train(perturbed, pert, order=ORDER, role="perturbed-reference",
              perturbation={"relative": relative, "seed": 1}, replay_routing_from=ref)
        model = Model()
        model.moe.router.choice_bias += choice_bias
        train(model, dist, role="distributed", replay_routing_from=ref)
        report = os.path.join(tmp, "report.json")
        done = subprocess.run([self.checker, dist, ref, "--perturbed", pert, "--no-cache",
                               "--json", report], capture_output=True, text=True)
        with open(report) as f:
            messages = [d["message"] for d in json.load(f)["diagnostics"]]
        return done, [m for m in messages if "top-k choices" in m]

    def test_a_clean_replaying_run_is_not_named(self):
        done, named = self.check(torch.zeros(EXPERTS))
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual(named, [])

    def test_choices_wrong_with_the_scores_right_are_named(self):
        # the choice bias moves the experts chosen, not the scores the router returns
        done, named = self.check(torch.tensor([2.0, 0.0, -2.0, 0.0]))
        self.assertEqual(len(named), 1, done.stdout + done.stderr)
        self.assertRegex(named[0], r"^moe.router: the distributed run's own top-k choices "
                                   r"differ from the reference's on \d+ of 48 tokens")
        self.assertIn("check once without replay_routing_from", named[0])
        self.assertIn("top-k choices", done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
