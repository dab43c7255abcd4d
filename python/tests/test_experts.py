"""Mixtures of experts with the capture's default modules: the router and the mixture are
hooked; experts that compute on routed rows (grouped experts given tokens-per-expert counts, a
loop over experts given the tokens that chose each) are left out with one warning each and named
in the manifest; a data-parallel run then checks clean against a one-process reference, and a
wrong combine is still found."""

import json
import os
import subprocess
import unittest
import warnings

import torch
import torch.nn as nn

import ttrace
from distributed import run_ranks, temporary_folder
from test_capture import load

BATCH, SEQ, DIM, EXPERTS, TOP_K = 4, 6, 8, 4, 2


class Router(nn.Module):
    def __init__(self, top_k=TOP_K):
        super().__init__()
        self.gate = nn.Linear(DIM, EXPERTS, bias=False)
        self.top_k = top_k

    def forward(self, x):
        return torch.topk(self.gate(x).softmax(-1), self.top_k, dim=-1)


class GroupedExperts(nn.Module):
    """torchtitan's GroupedExperts in small: the routed tokens sorted by expert, and how many
    each expert has."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(EXPERTS, DIM, DIM) * 0.3)

    def forward(self, rows, counts):
        starts = [0] + counts.cumsum(0).tolist()
        return torch.cat([rows[starts[e]:starts[e + 1]] @ self.w[e] for e in range(EXPERTS)])


class GroupedMoE(nn.Module):
    """Router, grouped experts, and a shared expert, as torchtitan's MoE lays them out;
    `unpermuted=False` plants the combine bug (each token gets another's expert output)."""

    def __init__(self, top_k=TOP_K, unpermuted=True):
        super().__init__()
        self.router = Router(top_k)
        self.experts = GroupedExperts()
        self.shared = nn.Linear(DIM, DIM)
        self.unpermuted = unpermuted

    def forward(self, x):
        weights, chosen = self.router(x)
        k = chosen.shape[-1]
        flat = x.reshape(-1, DIM)
        order = chosen.reshape(-1).argsort(stable=True)
        counts = torch.bincount(chosen.reshape(-1), minlength=EXPERTS)
        routed = self.experts(flat[order // k], counts)
        if self.unpermuted:
            routed = torch.zeros_like(routed).index_copy(0, order, routed)
        combined = (routed.view(-1, k, DIM) * weights.reshape(-1, k, 1)).sum(1)
        return combined.view_as(x) + self.shared(x)


class LoopMoE(nn.Module):
    """Hugging Face's layout: the block is the router (its own top_k), and each expert in a
    ModuleList is given the tokens that chose it."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(DIM, EXPERTS, bias=False)
        self.experts = nn.ModuleList([nn.Linear(DIM, DIM) for _ in range(EXPERTS)])
        self.top_k = TOP_K

    def forward(self, x):
        flat = x.reshape(-1, DIM)
        weights, chosen = torch.topk(self.gate(flat).softmax(-1), self.top_k, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            out = out.index_add(0, token, expert(flat[token]) * weights[token, slot, None])
        return out.view_as(x)


class Layer(nn.Module):
    def __init__(self, moe):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.moe = moe

    def forward(self, x):
        return x + self.moe(self.norm(x))


class Model(nn.Module):
    def __init__(self, moe=GroupedMoE):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([Layer(moe()) for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def micro_batch(m):
    return torch.randn(BATCH, SEQ, DIM, generator=torch.Generator().manual_seed(10 + m))


def train(model, folder, rows=slice(None), **capture):
    """One iteration of two micro-batches (rows `rows` of each), captured with the default
    modules; the data-parallel gradients summed over the ranks."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    cap = ttrace.Capture(model, folder, optimizer=optimizer, iterations=[0], **capture)
    for m in range(2):
        model(micro_batch(m)[rows]).square().sum().backward()
    if torch.distributed.is_initialized():
        for p in model.parameters():
            torch.distributed.all_reduce(p.grad)
    optimizer.step()
    cap.close()


def data_parallel(rank, world, out, unpermuted):
    torch.set_num_threads(1)  # the parent's OpenMP pool does not survive the fork
    rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warnings are the one-process tests'
        train(Model(lambda: GroupedMoE(unpermuted=unpermuted)), out, rows=rows,
              role="distributed")


class MixtureOfExpertsTest(unittest.TestCase):
    def test_the_default_modules_hook_the_router_and_the_mixture(self):
        names = ttrace.default_modules(Model())
        for n in ("layers.0", "layers.0.moe", "layers.0.moe.router", "layers.0.moe.router.gate",
                  "layers.0.moe.experts", "layers.0.moe.shared"):
            self.assertIn(n, names)
        self.assertEqual(len(names), len(set(names)))
        # a block that is its own router: no mixture above it is added
        names = ttrace.default_modules(Model(LoopMoE))
        self.assertIn("layers.0.moe", names)
        self.assertIn("layers.0.moe.experts.3", names)
        self.assertNotIn("layers.0.norm.weight", names)

    def capture_alone(self, model):
        folder = temporary_folder(self)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            train(model, folder, role="reference")
        routed = [str(w.message) for w in caught if "routed rows" in str(w.message)]
        manifest, ranks = load(folder)
        recorded = {p["name"] for p in ranks[0]
                    if p["kind"] not in ("param", "param_grad", "updated_param")}
        return routed, manifest, recorded

    def test_grouped_experts_are_left_out_once_with_a_warning(self):
        routed, manifest, recorded = self.capture_alone(Model())
        self.assertEqual(len(routed), 2, routed)  # one per layer, not per call
        self.assertIn("layers.0.moe.experts computes on routed rows (48 rows where its mixture "
                      "of experts has 24 tokens, with tokens-per-expert counts)", routed[0])
        self.assertEqual(manifest["capture"]["routed_rows_left_out"],
                         ["layers.0.moe.experts", "layers.1.moe.experts"])
        self.assertNotIn("layers.0.moe.experts", recorded)
        for n in ("layers.0.moe", "layers.0.moe.router", "layers.0.moe.shared"):
            self.assertIn(n, recorded)

    def test_one_expert_per_token_is_told_by_its_counts(self):
        # with top-1 routing the sorted rows are as many as the tokens
        routed, manifest, _ = self.capture_alone(Model(lambda: GroupedMoE(top_k=1)))
        self.assertEqual(manifest["capture"]["routed_rows_left_out"],
                         ["layers.0.moe.experts", "layers.1.moe.experts"], routed)

    def test_a_loop_over_experts_leaves_each_expert_out(self):
        _, manifest, recorded = self.capture_alone(Model(LoopMoE))
        self.assertEqual(manifest["capture"]["routed_rows_left_out"],
                         [f"layers.{i}.moe.experts.{e}" for i in range(2)
                          for e in range(EXPERTS)])
        self.assertIn("layers.0.moe", recorded)
        self.assertIn("layers.0.moe.gate", recorded)


class DataParallelCheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.checker = os.environ.get("TTRACE_CHECK")
        if not cls.checker:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")

    def check(self, unpermuted):
        tmp = temporary_folder(self)
        ref, dist = os.path.join(tmp, "ref"), os.path.join(tmp, "dist")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train(Model(), ref, role="reference")
        run_ranks(2, data_parallel, dist, unpermuted)
        report = os.path.join(tmp, "report.json")
        done = subprocess.run([self.checker, dist, ref, "--no-cache", "--json", report],
                              capture_output=True, text=True)
        with open(report) as f:
            return done, json.load(f)

    def test_a_clean_data_parallel_run_compares_every_tensor(self):
        done, report = self.check(unpermuted=True)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertNotIn("not comparable", done.stdout)
        self.assertNotIn("not captured", done.stdout)

    def test_a_combine_without_unpermutation_is_found_at_the_mixture(self):
        done, report = self.check(unpermuted=False)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertEqual(report["localization"]["root_cause"]["module"], "layers.0.moe",
                         report["localization"])


if __name__ == "__main__":
    unittest.main()
