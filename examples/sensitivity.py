#!/usr/bin/env python3
"""Sensitivity, measured: how large a systematic error ttrace sees, per dtype and tensor kind.

For each model size, recipe and layout, runs the GPT trainer's clean distributed run, its
reference and perturbed reference, then finds for every logical tensor the smallest relative
error delta that ttrace-check flags when one shard of the tensor (the one on the lowest rank
holding it, on every copy of that shard) is scaled by (1 + delta) (inject.py). The delta is
bisected on a log scale between 1e-9 and 1.

One check per bisection round serves every tensor: a tensor's comparison does not depend on
another tensor's data, so one injected copy of the trace carries each tensor's own delta (the
sweep verifies this on a few tensors per case with injections of that tensor alone).

It reports, per kind, the smallest delta flagged and, beside it, the tensor's own round-off (its
relative error in the clean run): how many times the round-off a bug must be before ttrace sees
it. It also checks that a change of one copy of a replicated shard, one unit in the last place,
is flagged by the replica check. The table goes to docs/detection.md's "sensitivity" section.

    sensitivity.py --check build/app/ttrace-check --table docs/detection.md
"""

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "gpt")]
import detection  # noqa: E402
import inject  # noqa: E402
from bugs import CONFIGS  # noqa: E402  (examples/gpt)

SIZES = {
    "default": [],
    "large": ["--hidden", "64", "--layers", "4", "--heads", "4", "--ffn", "128", "--seq", "32",
              "--vocab", "128"],
    "xl": ["--hidden", "128", "--layers", "8", "--heads", "8", "--ffn", "512", "--seq", "64",
           "--vocab", "256"],
}
LOW, HIGH = -9.0, 0.0  # log10 of the bisection's bounds
FP8_OPERAND = "forward_input (fp8 operand)"


def kind_label(key, dtypes):
    if key.kind == "forward_input" and key.index > 0 and any(d.startswith("fp8") for d in dtypes):
        return FP8_OPERAND
    return key.kind


def run_traces(work, sizes, dtypes, configs, iterations, jobs, reuse):
    """The trainer runs: per size and dtype a reference and a perturbed reference, per layout
    a clean distributed run."""
    tasks = []

    def task(out, dtype, role, config, size):
        if reuse and os.path.exists(os.path.join(out, ".done")):
            return
        if os.path.exists(f"{out}.sensitivity.json"):
            os.remove(f"{out}.sensitivity.json")  # the results of the run replaced
        argv = detection.train_args(out, dtype, role, config=config)
        argv += ["--iterations", str(iterations)] + SIZES[size]
        code = yield detection.fork_train(argv, out + ".log")
        if code != 0:
            raise RuntimeError(f"the {role} run failed (see {out}.log)")
        open(os.path.join(out, ".done"), "w").close()

    for size in sizes:
        for dtype in dtypes:
            base = os.path.join(work, f"{size}-{dtype}")
            tasks.append(task(base + "-ref", dtype, "reference", None, size))
            tasks.append(task(base + "-pert", dtype, "perturbed-reference", None, size))
            for config in configs:
                tasks.append(task(f"{base}-{config}", dtype, "distributed", config, size))
    start = time.time()
    detection.run_all(tasks, jobs)
    times = os.path.join(work, "trainer-seconds.json")  # the runs' time, for --reuse
    spent = {}
    if os.path.exists(times):
        with open(times) as f:
            spent = json.load(f)
    key = ",".join(f"{s}-{d}" for s in sizes for d in dtypes) + "/" + ",".join(configs)
    if time.time() - start > 5 or key not in spent:
        spent[key] = spent.get(key, 0) * bool(reuse) + time.time() - start
        with open(times, "w") as f:
            json.dump(spent, f)
    return spent[key]


class Case:
    """One clean distributed run and the bisection of every tensor's smallest flagged delta."""

    def __init__(self, work, check, size, dtype, config):
        self.size, self.dtype, self.config = size, dtype, config
        base = os.path.join(work, f"{size}-{dtype}")
        self.dist, self.ref, self.pert = f"{base}-{config}", base + "-ref", base + "-pert"
        self.scratch = f"{base}-{config}-inject"
        self.check_binary = check
        self.checks = 0
        self.pieces = inject.index_trace(self.dist)

    def check(self, folder):
        """{Key: tensor result} of ttrace-check on `folder`, and its exit code."""
        report = folder + ".json"
        if os.path.exists(report):
            os.remove(report)
        pid = detection.spawn([self.check_binary, folder, self.ref, "--perturbed", self.pert,
                               "--no-cache", "--quiet", "--json", report], folder + ".check.log")
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        self.checks += 1
        if code not in (0, 1) or not os.path.exists(report):
            raise RuntimeError(f"ttrace-check failed on {folder} (exit code {code}, see "
                               f"{folder}.check.log)")
        with open(report) as f:
            tensors = json.load(f)["tensors"]
        return {inject.Key(t["key"]["name"], t["key"]["kind"], t["key"]["index"],
                           t["key"]["iteration"], t["key"]["micro_batch"]): t for t in tensors}

    def injected_check(self, injections):
        inject.inject(self.dist, self.scratch, injections, self.pieces)
        results = self.check(self.scratch)
        shutil.rmtree(self.scratch)
        return results

    def run(self, rounds, verify):
        self.rounds, start = rounds, time.time()
        clean = self.check(self.dist)
        keys = [k for k in self.pieces if k in clean and not clean[k]["faulty"]]
        self.tensors = {}
        for k in keys:
            stored = sorted({p.dtype for p in self.pieces[k]})
            c = clean[k]
            self.tensors[k] = {
                "tensor": k.text(), "label": kind_label(k, stored), "stored": stored,
                "clean_error": c["metrics"]["relative_error"],
                "clean_normalized": c["normalized_error"], "threshold": c["threshold"]["value"],
                "lo": LOW, "hi": None, "error_at_hi": None, "applied_hi": None,
                "zero_shard": False, "unflagged_at_1": False}
        # the upper bound: a tensor not flagged at delta 1 is left out (counted)
        self._round({k: HIGH for k in keys})
        for _ in range(rounds):
            active = {k: (t["lo"] + t["hi"]) / 2 for k, t in self.tensors.items()
                      if t["hi"] is not None}
            self._round(active)
        self.verification = self._verify(verify)
        self.one_copy = self._one_copy()
        self.seconds = time.time() - start

    def _round(self, log_deltas):
        injections = [inject.Injection(k, 10.0 ** d) for k, d in log_deltas.items()]
        results = self.injected_check(injections)
        for inj, (k, d) in zip(injections, log_deltas.items()):
            t = self.tensors[k]
            if inj.applied == 0 and d == HIGH:
                t["zero_shard"] = True  # nothing to scale: the shard is all zeros
            elif results[k]["faulty"]:
                t["hi"], t["applied_hi"] = d, inj.applied
                t["error_at_hi"] = results[k]["metrics"]["relative_error"]
            elif d == HIGH:
                t["unflagged_at_1"] = True
            else:
                t["lo"] = d

    def found(self):
        return [(k, t) for k, t in self.tensors.items() if t["hi"] is not None]

    def _verify(self, count):
        """Single-tensor injections at the smallest flagged delta (must be flagged) and at the
        largest unflagged one (must not be), for `count` tensors of different kinds."""
        by_label = {}
        for k, t in self.found():
            by_label.setdefault(t["label"], []).append((k, t))
        chosen = []
        while len(chosen) < count and any(by_label.values()):
            for label in sorted(by_label):
                if by_label[label] and len(chosen) < count:
                    group = by_label[label]
                    chosen.append(group.pop(len(group) // 2))
        outcome = {"tensors": 0, "agree": 0, "disagree": []}
        for k, t in chosen:
            flagged_hi = self.injected_check([inject.Injection(k, 10.0 ** t["hi"])])
            flagged_lo = self.injected_check([inject.Injection(k, 10.0 ** t["lo"])])
            outcome["tensors"] += 1
            if flagged_hi[k]["faulty"] and not flagged_lo[k]["faulty"]:
                outcome["agree"] += 1
            else:
                outcome["disagree"].append(k.text())
        return outcome

    def _one_copy(self):
        """Each tensor whose shard has several copies: one copy changed by twice the storage
        resolution (about one unit in the last place) must be flagged by the replica check."""
        injections = []
        for k in self.tensors:
            found = self.pieces[k]
            copies = [p for p in found if p.ranges == found[0].ranges]
            if len(copies) > 1:
                res = max(inject.RESOLUTION[p.dtype] for p in copies)
                injections.append(inject.Injection(k, 2 * res, rank=copies[-1].rank,
                                                   copies="one"))
        if not injections:
            return None
        results = self.injected_check(injections)
        changed = [i for i in injections if i.applied]
        flagged = [i for i in changed if results[i.key]["faulty"]
                   and results[i.key]["replica_mismatches"]]
        return {"tensors": len(injections), "changed": len(changed), "flagged": len(flagged),
                "unflagged": [i.key.text() for i in changed if i not in flagged]}

    # -- the results, kept in the work folder so that --reuse can redo the table alone ------

    def results_path(self):
        return self.dist + ".sensitivity.json"

    def save(self):
        with open(self.results_path(), "w") as f:
            json.dump({"tensors": list(self.tensors.values()), "verification": self.verification,
                       "one_copy": self.one_copy, "checks": self.checks,
                       "rounds": self.rounds, "seconds": self.seconds}, f, indent=1)

    def load(self, rounds):
        """The results of an earlier run with as many rounds, if any."""
        if not os.path.exists(self.results_path()):
            return False
        with open(self.results_path()) as f:
            saved = json.load(f)
        if saved.get("rounds") != rounds:
            return False
        self.rounds = rounds
        self.tensors = {t["tensor"]: t for t in saved["tensors"]}
        self.verification, self.one_copy = saved["verification"], saved["one_copy"]
        self.checks, self.seconds = saved["checks"], saved.get("seconds", 0)
        return True

    def rows(self):
        """Per kind: the sweep's numbers."""
        out = []
        labels = sorted({t["label"] for t in self.tensors.values()},
                        key=lambda lab: (inject.KINDS.index(lab.split()[0]), lab))
        for label in labels:
            group = [t for t in self.tensors.values() if t["label"] == label]
            found = [t for t in group if t["hi"] is not None]
            clean = [t["clean_error"] for t in found]
            out.append({
                "label": label, "tensors": len(group), "found": len(found),
                "zero_shard": sum(1 for t in group if t["zero_shard"]),
                "unflagged_at_1": sum(1 for t in group if t["unflagged_at_1"]),
                "stored": sorted({d for t in group for d in t["stored"]}),
                "delta": [10.0 ** t["hi"] for t in found],
                "clean_error": _numbers(clean),
                "clean_normalized": _numbers([t["clean_normalized"] for t in found]),
                "threshold": _numbers([t["threshold"] for t in group]),
                "ratio": [t["error_at_hi"] / t["clean_error"] for t in found
                          if _positive(t["clean_error"]) and _positive(t["error_at_hi"])],
                "exact": sum(1 for c in clean if c == 0),
            })
        return out


def _positive(x):
    return isinstance(x, (int, float)) and x > 0


def _num(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.2g}"


def _median(values):
    return _num(statistics.median(values)) if values else "-"


def _median_range(values):
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1 or min(values) == max(values):
        return _num(med)
    return f"{_num(med)} ({_num(min(values))}-{_num(max(values))})"


def _numbers(values):
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


EPS = {"fp32": 2.0 ** -23, "bf16": 2.0 ** -7, "fp8": 2.0 ** -7, "fp8_rowwise": 2.0 ** -7}
GRADIENTS = ("output_grad", "input_grad", "param_grad", "main_grad")
ACTIVATIONS = ("forward_input", "forward_output")


def _pooled(cases, dtype, labels, what="delta"):
    return [v for c in cases if c.dtype == dtype for r in c.rows() if r["label"] in labels
            for v in r[what]]


def _growth(cases, dtypes):
    """How the activations' and gradients' median delta moves from the first size to the last."""
    sizes = list(dict.fromkeys(c.size for c in cases))
    if len(sizes) < 2:
        return ""
    parts = []
    for d in dtypes:
        first, last = ([c for c in cases if c.size == s] for s in (sizes[0], sizes[-1]))
        a, b = (_pooled(g, d, ACTIVATIONS + GRADIENTS) for g in (first, last))
        if a and b:
            parts.append(f"{statistics.median(b) / statistics.median(a):.1f}x in {d}")
    return (f" From the {sizes[0]} size to the {sizes[-1]} one it grows by " + ", "
            .join(parts) + " (activations and gradients, medians).") if parts else ""


def findings(cases):
    """The paragraph for users, its numbers from the sweep."""
    dtypes = list(dict.fromkeys(c.dtype for c in cases))
    lines = ["### What the numbers say", ""]
    by_dtype = []
    for d in dtypes:
        act, grad = _pooled(cases, d, ACTIVATIONS), _pooled(cases, d, GRADIENTS)
        par = _pooled(cases, d, ("param", "updated_param"))
        by_dtype.append(f"{d}: activations {_median(act)}, gradients {_median(grad)}, "
                        f"parameters {_median(par)}")
    lines.append(
        "- **The compute dtype sets the floor.** Median smallest delta flagged over every "
        "size and layout, " + "; ".join(by_dtype) + ". It is the tensor's threshold (8 x the "
        "perturbed reference's error, at least 1 eps) divided by the shard's share of the "
        "tensor's norm." + _growth(cases, dtypes))
    reordered = [c for c in cases if CONFIGS[c.config].tp > 1 or CONFIGS[c.config].cp > 1]
    if reordered:
        per = "; ".join(f"{d} {_median(_pooled(reordered, d, ACTIVATIONS + GRADIENTS, 'ratio'))}"
                        for d in dtypes)
        lines.append(
            "- **How many times the round-off.** Where the layout reorders the sums (tensor and "
            "sequence parallelism), a bug must move an activation or a gradient by about "
            f"{per} times (median) the clean run's own error before ttrace sees it. Under data "
            "parallelism the activations and many gradients are bitwise equal to the reference "
            "(`exact`): the tolerance still comes from the perturbed reference, so the smallest "
            "delta is the same while the clean error is far smaller.")
    params = [(d, _pooled(cases, d, ("param",))) for d in dtypes]
    exact = sum(r["exact"] for c in cases for r in c.rows() if r["label"] == "param")
    tried = sum(r["found"] for c in cases for r in c.rows() if r["label"] == "param")
    lines.append(
        f"- **Parameters.** {exact} of {tried} parameters are bitwise equal to the reference in "
        "the clean runs, yet a wrong one is seen only from a delta of "
        + ", ".join(f"{_median(v)} ({d}: {statistics.median(v) / EPS[d]:.1f} eps)"
                    for d, v in params if v)
        + " of the compute dtype. The perturbed reference moves the weights by a "
        "round-off-sized amount and the tolerance is 8 times that; a parameter loaded or "
        "initialized wrong by less stays unseen in its own values (its effect on the "
        "activations may still show).")
    if "bf16" in dtypes:
        pg = _pooled(cases, "bf16", ("param_grad",))
        mg = _pooled(cases, "bf16", ("main_grad",))
        lines.append(
            f"- **Storing in fp32 buys nothing.** In the bf16 recipe the fp32 `main_grad` needs "
            f"a delta of {_median(mg)}, as the bf16 `param_grad` it holds ({_median(pg)}): its "
            "values carry bf16 round-off, and so does its perturbed reference.")
    fp8 = [c for c in cases if c.dtype == "fp8"]
    if fp8:
        grads = [r for c in fp8 for r in c.rows() if r["label"] in GRADIENTS]
        tried = sum(r["tensors"] for r in grads)
        unflagged = sum(r["unflagged_at_1"] for r in grads)
        thresholds = [v for r in grads for v in r["threshold"]]
        lines.append(
            f"- **fp8 recipes are coarse.** The perturbation flips fp8 roundings: gradient "
            f"thresholds are {_median(thresholds)} (median relative error), and {unflagged} of "
            f"{tried} gradients are not flagged even when their shard is doubled (delta 1). "
            "Bugs in fp8 runs are seen by their scales (the fp8 scale check) or by being "
            "large.")
    low = {d: _median(_pooled(cases, d, ACTIVATIONS + GRADIENTS)) for d in dtypes}
    lines += [
        "- **A single diverging copy is always seen.** A change of one copy of a replicated "
        "shard is flagged by the bitwise replica check at one unit in the last place (below).",
        "",
        "**Which dtype to capture in when hunting a small effect.** Run the distributed job and "
        "both references in fp32 (`--dtype fp32` here; in a framework, the fp32 recipe with "
        "the same layout) and compare those: the smallest delta flagged in an activation or "
        f"gradient drops from {low.get('bf16', '-')} in bf16 to {low.get('fp32', '-')} in "
        "fp32 (medians above). Capturing a bf16 run's tensors in fp32 "
        "does not help (the `main_grad` row): the round-off of the computation, not the "
        "storage, sets the tolerance. A bug that lives only in the low-precision path (an fp8 "
        "amax, a bf16-only kernel) has to be hunted in its own dtype, where only errors of "
        "the sizes above are visible.",
    ]
    return "\n".join(lines)


def table(cases, command, seconds, rounds):
    step = (HIGH - LOW) / 2 ** rounds
    columns = list(dict.fromkeys((c.size, c.config) for c in cases))
    lines = [
        "## Sensitivity: the smallest error ttrace sees",
        "",
        "Generated by `" + command + "` "
        f"({sum(seconds) / 60:.0f} min on {os.cpu_count()} cores: the trainer runs "
        f"{seconds[0] / 60:.0f}, the checks {seconds[1] / 60:.0f}); do not edit by hand.",
        "",
        "Each clean distributed run of `examples/gpt/train.py` (sizes: "
        + "; ".join(f"{s} = " + (f"`{' '.join(SIZES[s])}`" if SIZES[s] else "its defaults")
                    for s in dict.fromkeys(c.size for c in cases))
        + ") is copied and one shard of a tensor (the one on the lowest rank holding it, "
        "changed on every copy of that shard, as a bug in its computation would) is multiplied "
        "by (1 + delta), re-encoded in the stored dtype (`examples/inject.py`); delta is "
        f"bisected on a log scale between 1e-9 and 1 to a factor of {10 ** step:.3f}, for "
        "every tensor of the run. One check per round serves every tensor (each carries its "
        "own delta: a tensor's comparison does not depend on another's data); single-tensor "
        "injections confirm it (below). The error is systematic: the simplest model of a "
        "wrong scale or a missing term; a random error of the same norm is judged alike (the "
        "test is on the Frobenius norm).",
        "",
        "Smallest delta flagged, median over the tensors of the kind (an activation's shard "
        "is half the tensor in both layouts, so its relative error is about delta / 1.4):",
        "",
        "| dtype | kind | " + " | ".join(f"{s} {c}" for s, c in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    dtypes = list(dict.fromkeys(c.dtype for c in cases))
    for d in dtypes:
        labels = []
        for c in cases:
            if c.dtype == d:
                labels += [r["label"] for r in c.rows() if r["label"] not in labels]
        labels.sort(key=lambda lab: (inject.KINDS.index(lab.split()[0]), lab))
        for label in labels:
            cells = []
            for size, config in columns:
                rows = [r for c in cases if (c.size, c.config, c.dtype) == (size, config, d)
                        for r in c.rows() if r["label"] == label]
                cells.append(_median(rows[0]["delta"]) if rows else "-")
            lines.append(f"| {d} | {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        findings(cases),
        "",
        "All numbers per size, dtype, layout and kind:",
        "",
        "- **smallest delta**: median (range) over the tensors of the kind;",
        "- **tensors**: flagged at some delta / tried; the rest are not flagged even at delta 1 "
        "(`not at 1`) or have an all-zero shard;",
        "- **threshold**: the tolerance in force (relative error), median over all tried;",
        "- **clean error**: the tensor's relative error in the clean run, its own round-off "
        "against the reference (median; normalized: clean error / threshold);",
        "- **x round-off**: the tensor's relative error at the smallest delta over its clean "
        "error, median (range): how many times the round-off a bug must be before ttrace sees "
        "it; tensors with a clean error of exactly 0 (`exact`) are left out of it.",
        "",
        "| size | dtype | layout | kind | stored | tensors | not at 1 | smallest delta | "
        "threshold | clean error | clean normalized | x round-off | exact |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        for r in c.rows():
            lines.append(
                f"| {c.size} | {c.dtype} | {c.config} | {r['label']} | {', '.join(r['stored'])} "
                f"| {r['found']}/{r['tensors']} | {r['unflagged_at_1']} | "
                f"{_median_range(r['delta'])} | {_median(r['threshold'])} | "
                f"{_median(r['clean_error'])} | {_median(r['clean_normalized'])} | "
                f"{_median_range(r['ratio'])} | {r['exact']} |")
    agree = sum(c.verification["tensors"] for c in cases), sum(
        c.verification["agree"] for c in cases)
    disagree = [f"{c.size}/{c.dtype}/{c.config}: {k}" for c in cases
                for k in c.verification["disagree"]]
    lines += ["", f"Single-tensor check of the shared rounds: {agree[1]} of {agree[0]} tensors "
              "(of different kinds, in every case) injected alone are flagged at their "
              "smallest delta and not at the largest unflagged one"
              + (f" (not: {'; '.join(disagree)})" if disagree else "") + "."]
    one = [c.one_copy for c in cases if c.one_copy]
    if one:
        changed = sum(o["changed"] for o in one)
        flagged = sum(o["flagged"] for o in one)
        lines += ["", "One copy of a replicated shard (data-parallel replicas, tensor-parallel "
                  "copies of a replicated tensor) changed by about one unit in the last place "
                  f"(delta = 2x the storage resolution): {flagged} of {changed} such tensors "
                  "whose stored values changed are flagged by the bitwise replica check, "
                  "whatever their error."]
    return "\n".join(lines)


def dump(cases, path):
    with open(path, "w") as f:
        json.dump({f"{c.size}/{c.dtype}/{c.config}": {
            "tensors": list(c.tensors.values()), "verification": c.verification,
            "one_copy": c.one_copy} for c in cases}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", required=True, help="the ttrace-check binary")
    ap.add_argument("--work", help="folder for the traces (default: a temporary one, removed)")
    ap.add_argument("--table", help="write the section into this file (docs/detection.md)")
    ap.add_argument("--sizes", default="default,large", help=f"of {sorted(SIZES)}")
    ap.add_argument("--dtypes", default="fp32,bf16,fp8")
    ap.add_argument("--configs", default="tp2_sp")
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=10, help="bisection rounds")
    ap.add_argument("--verify", type=int, default=4,
                    help="tensors per case re-checked with single injections")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reuse", action="store_true",
                    help="keep the trainer runs already complete in --work")
    args = ap.parse_args()
    sizes, dtypes, configs = (args.sizes.split(","), args.dtypes.split(","),
                              args.configs.split(","))
    if set(sizes) - set(SIZES):
        ap.error(f"unknown sizes {sorted(set(sizes) - set(SIZES))}")
    os.nice(10)  # the trainer runs and checks share the machine
    import detect as gpt  # examples/gpt/detect.py: the trainer for detection.fork_train
    detection.TRAINER = gpt.TRAINER
    work = args.work or tempfile.mkdtemp(prefix="ttrace-sensitivity-")
    os.makedirs(work, exist_ok=True)
    start = time.time()
    trainer_seconds = run_traces(work, sizes, dtypes, configs, args.iterations, args.jobs,
                                 args.reuse)
    print(f"traces done, {time.time() - start:.0f} s", flush=True)
    cases = []
    for size in sizes:
        for dtype in dtypes:
            for config in configs:
                case = Case(work, os.path.abspath(args.check), size, dtype, config)
                if not (args.reuse and case.load(args.rounds)):
                    case.run(args.rounds, args.verify)
                    case.save()
                cases.append(case)
                print(f"{size} {dtype} {config}: {len(case.found())}/{len(case.tensors)} "
                      f"tensors, {case.checks} checks, {time.time() - start:.0f} s", flush=True)
    seconds = (trainer_seconds, sum(c.seconds for c in cases))
    dump(cases, os.path.join(work, "sensitivity.json"))
    command = ("examples/sensitivity.py --check build/app/ttrace-check --table docs/detection.md"
               f" --sizes {args.sizes} --dtypes {args.dtypes} --configs {args.configs}"
               f" --iterations {args.iterations} --rounds {args.rounds}")
    text = table(cases, command, seconds, args.rounds)
    if args.table:
        detection.write_section(args.table, "sensitivity", text)
    print(text)
    if args.work is None:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
