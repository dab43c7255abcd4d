#!/usr/bin/env python3
"""The size sweep of clean runs: how far a bug-free distributed run stays from an alarm as the
model grows. For each model size of the plan (PLAN) it runs the reference and the perturbed
reference once per dtype, then each layout's bug-free distributed run, checks each with
ttrace-check, and records for each (size, layout, dtype) the highest normalized error of any
tensor (the margin to a false alarm), that tensor's name, kind and iteration, and the highest
of each iteration and of each kind. The traces of a size are deleted once it is checked.

The raw results go to --results (JSON, one record per run; sizes already there are skipped,
so an interrupted sweep resumes). From them it fits, per dtype, log(highest) as a linear
function of log(hidden), log(layers), log(seq) and log(iteration + 1) by least squares,
extrapolates to hidden 8192, 80 layers, sequence 4096, and writes the section "size_sweep"
of docs/detection.md (--table).

With --references laid-out it checks each clean run against a reference laid out over ranks
instead, in the layout the trainer's detect.py gives the run's layout (reference_layouts; the
perturbed reference stays on one device, as in detection.py), and against the single-device
reference too: the same run against both, so that the difference is the reference's alone. It
runs the small plan LAID_OUT (PLAN's indices) unless --points, keeps its records apart
(--results of its own), fits nothing (few points) and writes the section
"size_sweep_laid_out_references", beside each cell the same size, layout and dtype of the
single-device sweep's results (--compare, docs/size_sweep.json).

    size_sweep.py --check build/app/ttrace-check --results size_sweep.json \\
        --table docs/detection.md
    size_sweep.py --results size_sweep.json --table docs/detection.md --fit-only
    size_sweep.py --references laid-out --check build/app/ttrace-check \\
        --results size_sweep_laid_out.json --table docs/detection.md
"""

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import detection  # noqa: E402

ITERATIONS = 3
TARGET = {"hidden": 8192, "layers": 80, "seq": 4096}  # the extrapolation's model
FIT_VOCAB = 512  # the fit uses the points of this vocabulary (the others check it)


@dataclass(frozen=True)
class Point:
    """One model size of one trainer, with the layouts and dtypes run at it. heads keep a head
    dimension of 32 (at least 2 heads), the FFN is 4 x hidden."""
    trainer: str
    hidden: int
    layers: int
    seq: int
    vocab: int = FIT_VOCAB
    layouts: tuple = ("tp2_sp", "pp2", "dp2", "cp2")
    dtypes: tuple = ("fp32", "bf16", "fp8")
    heads: int = 0
    ffn: int = 0

    def __post_init__(self):
        if not self.heads:
            object.__setattr__(self, "heads", max(2, self.hidden // 32))
        if not self.ffn:
            object.__setattr__(self, "ffn", 4 * self.hidden)

    @property
    def name(self):
        return (f"{self.trainer}-h{self.hidden}-l{self.layers}-s{self.seq}-v{self.vocab}")

    def size_args(self):
        if self.trainer == "gpt":  # 4 sequences per micro-batch, 2 micro-batches
            return ["--hidden", str(self.hidden), "--layers", str(self.layers), "--seq",
                    str(self.seq), "--vocab", str(self.vocab), "--heads", str(self.heads),
                    "--ffn", str(self.ffn), "--batch", "4"]
        return ["--dim", str(self.hidden), "--layers", str(self.layers), "--seq", str(self.seq),
                "--vocab", str(self.vocab), "--heads", str(self.heads), "--kv-heads",
                str(max(2, self.heads // 2)), "--ffn", str(self.ffn), "--batch", "8"]


GPT_COMBOS = ("tp2_sp", "pp2", "dp2", "cp2", "tp2", "pp2_tp2_sp", "tp2_dp2", "cp2_tp2")
NATIVE = dict(layouts=("tp2_sp", "fsdp2", "pp2", "fsdp2_tp2_sp"),
              dtypes=("fp32", "bf16"))

# One axis at a time from the base (hidden 128, 4 layers, sequence 64), in the order that gives
# every axis two points first; today's bug-corpus size and the larger points with another
# vocabulary check the fit. Ran on 2 shared cores: the layouts along the axes are the three
# that split a reduction differently (SP's norm-gradient sums over tp, dp's over the batch,
# cp's over the sequence); the combinations run at the base and today's size.
AXIS = ("tp2_sp", "dp2", "cp2")
PLAN = [
    Point("gpt", 16, 2, 8, vocab=32, heads=2, ffn=32, layouts=GPT_COMBOS),
    Point("gpt", 128, 4, 64, layouts=GPT_COMBOS),
    Point("gpt", 256, 4, 64, layouts=AXIS),
    Point("gpt", 128, 8, 64, layouts=AXIS),
    Point("gpt", 128, 4, 128, layouts=AXIS),
    Point("gpt", 64, 4, 64, layouts=AXIS),
    Point("gpt", 128, 2, 64, layouts=AXIS),
    Point("gpt", 128, 4, 32, layouts=AXIS),
    Point("torch_native", 128, 4, 64, **NATIVE),
    Point("gpt", 512, 4, 64, layouts=AXIS),
    Point("gpt", 128, 4, 256, layouts=AXIS),
    Point("gpt", 128, 12, 64, layouts=AXIS),
    Point("gpt", 512, 8, 128, vocab=2048, layouts=("tp2_sp",)),
    # points off the axes (the fit must not rest on the base alone) and further along them
    Point("gpt", 256, 8, 128, layouts=AXIS),
    Point("gpt", 1024, 4, 64, layouts=AXIS),
    Point("gpt", 128, 16, 64, layouts=AXIS),
    Point("gpt", 64, 12, 256, layouts=AXIS),
    Point("gpt", 512, 12, 32, layouts=AXIS),
    Point("gpt", 256, 6, 64, layouts=AXIS),  # the size of issue 18's first measurement
    # the largest that ran in minutes here (hidden 1024, 12 layers, sequence 256, vocabulary
    # 8192 would write about 15 GB per trace and take about an hour for its three runs)
    Point("gpt", 1024, 8, 128, vocab=4096, layouts=("tp2_sp",), dtypes=("bf16",)),
    # the torch-native trainer smaller and larger than its base (first run laid out)
    Point("torch_native", 64, 2, 32, **NATIVE),
    Point("torch_native", 256, 4, 128, **NATIVE),
]
# --references laid-out: a reference per (dtype, reference layout) on top of the single-device
# ones, and two checks a run; on 2 shared cores, six points of PLAN: the tiny one and the base
# with every GPT layout, a larger GPT one off the axes, the torch-native trainer at three sizes
LAID_OUT = (0, 1, 13, 8, 20, 21)


# -- running -----------------------------------------------------------------------------------

def trainer_main(trainer):
    """train.py's main of `trainer`, imported in the forked child only: the two trainers'
    modules share names (train, model, bugs) and cannot live in one process."""
    def main(argv):
        sys.path[:0] = [os.path.join(HERE, trainer)]
        from train import main as train_main
        train_main(argv)
    return main


def _finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def is_norm_grad(key):
    """A gradient of a layer norm's weight or bias: a sum over every token of the micro-batch
    (and, under SP, CP or DP, split over ranks)."""
    module = key["name"].rsplit(".", 2)[-2] if key["name"].count(".") else ""
    return key["kind"] in ("param_grad", "main_grad") and "norm" in module


def is_moe(key):
    """A tensor of the mixture of experts (router or expert): top-k routing is discontinuous,
    a token whose choice flips moves its expert's tensors by a whole token's share."""
    return ".experts." in key["name"] or ".router" in key["name"]


def family_of(key):
    return "norm_grads" if is_norm_grad(key) else "moe" if is_moe(key) else "rest"


FAMILIES = {"norm_grads": "norm weight and bias gradients", "moe": "mixture-of-experts tensors",
            "rest": "every other tensor"}


def summarize(report):
    """The highest normalized error of any tensor, of each iteration and of each kind; with
    the tensor (name, kind, iteration, micro-batch) where it was. Non-finite errors are counted
    apart (a clean run should have none)."""
    def entry(t):
        k, threshold = t["key"], t.get("threshold") or {}
        out = {"value": t["normalized_error"], "name": k["name"], "kind": k["kind"],
               "iteration": k["iteration"], "micro_batch": k["micro_batch"],
               "method": threshold.get("method")}
        if threshold.get("perturbation_rejected"):  # judged by another threshold: say why
            out.update(threshold=threshold.get("value"),
                       perturbation_error=threshold.get("perturbation_error"))
        return out

    tensors = report["tensors"]
    finite = [t for t in tensors if _finite(t["normalized_error"])]
    best = max(finite, key=lambda t: t["normalized_error"], default=None)
    per_iteration, per_kind = {}, {}
    for t in finite:
        it, kind = str(t["key"]["iteration"]), t["key"]["kind"]
        if it not in per_iteration or t["normalized_error"] > per_iteration[it]["value"]:
            per_iteration[it] = entry(t)
        if kind not in per_kind or t["normalized_error"] > per_kind[kind]["value"]:
            per_kind[kind] = entry(t)
    scales = [s["max_difference"] / s["tolerance"] for s in
              (t.get("fp8_scales") for t in tensors)
              if s and _finite(s["max_difference"]) and _finite(s["tolerance"])
              and s["tolerance"] > 0]
    top = sorted(finite, key=lambda t: -t["normalized_error"])[:5]
    families = {}
    for t in finite:
        f = family_of(t["key"])
        if f not in families or t["normalized_error"] > families[f]["value"]:
            families[f] = entry(t)
    coverage = report.get("coverage") or {}
    return {"highest": entry(best) if best else None, "top": [entry(t) for t in top],
            "families": families, "coverage": {k: coverage.get(k, 0) for k in (
                "blind", "not_captured", "not_comparable", "not_in_reference")},
            "per_iteration": per_iteration, "per_kind": per_kind,
            "tensors": len(tensors), "non_finite": len(tensors) - len(finite),
            "faulty": sum(1 for t in tensors if t.get("faulty")),
            "fp8_scale_highest": max(scales) if scales else None}


def alarm(r):
    """Whether the check of record `r` raised an alarm, as detection.py judges one (the
    records of before `coverage` have only their exit code; none: no check ran)."""
    return r.get("exit_code") is not None and not detection.no_alarm(r["exit_code"],
                                                                     r.get("coverage"))


def reference_layouts(trainer):
    """The reference layout of each of `trainer`'s layouts: its detect.py's
    TRAINER.reference_layouts, the one place they are written. Read in a forked child, which
    sends them back as JSON through a pipe: detect.py imports the trainer's train and bugs,
    whose names the other trainer's modules share (see trainer_main)."""
    read, write = os.pipe()
    pid = os.fork()
    if not pid:
        code = 1
        try:
            os.close(read)
            sys.path[:0] = [os.path.join(HERE, trainer)]
            import detect
            with os.fdopen(write, "w") as f:
                json.dump(detect.TRAINER.reference_layouts or {}, f)
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"could not read {trainer}/detect.py's reference_layouts")
    return json.loads(text)


def reference(point, folder, dtype, role, layout=None):
    """A task for detection.run_all: a reference run, on one device or laid out as `layout`."""
    argv = detection.train_args(folder, dtype, role, config=layout) + [
        "--iterations", str(ITERATIONS)]
    code = yield detection.fork_train(argv + point.size_args(), folder + ".log")
    if code != 0:
        raise RuntimeError(f"the {role} run failed (see {folder}.log)")


def distributed(point, work, check, layout, dtype, records, against=None):
    """A task for detection.run_all: one clean distributed run, its checks and their records:
    against the single-device reference, and with `against` (a layout) against the reference
    laid out so too, each check a record with its "reference" (a layout or "one-device"). The
    run's traces (and the report) are kept where a check raised an alarm, to look at."""
    folder = os.path.join(work, f"{layout}-{dtype}")
    base = {**asdict(point), "layout": layout, "dtype": dtype, "iterations": ITERATIONS}
    start = time.time()
    argv = detection.train_args(folder, dtype, config=layout) + ["--iterations", str(ITERATIONS)]
    code = yield detection.fork_train(argv + point.size_args(), folder + ".log")
    if code != 0:
        with open(folder + ".log") as f:
            error = f"the trainer failed: {f.read()[-400:]}"
        records += [{**base, "reference": ref, "error": error}
                    for ref in ([against] if against else []) + ["one-device"]]
        return
    kept = False
    for ref in ([against] if against else []) + ["one-device"]:
        record = {**base, "reference": ref}
        report = f"{folder}-vs-{ref}.json"
        refs = (detection.reference_folder(work, dtype, layout=None if ref == "one-device"
                                           else ref),
                detection.reference_folder(work, dtype, "perturbed-reference"))
        record["exit_code"] = yield detection.spawn(
            [check, folder, refs[0], "--perturbed", refs[1], "--no-cache", "--quiet", "--json",
             report], f"{folder}-vs-{ref}.check.log")
        if not os.path.exists(report):
            record["error"] = f"no report (exit code {record['exit_code']})"
        else:
            with open(report) as f:
                record.update(summarize(json.load(f)))
            if not alarm(record):
                os.remove(report)
        kept = kept or "error" in record or alarm(record)
        record["seconds"] = time.time() - start
        records.append(record)
    if not kept:
        shutil.rmtree(folder, ignore_errors=True)


def run_point(point, work, check, jobs, layouts=None):
    """Runs and checks one size; returns its records. `layouts`: the reference layout of each
    layout (--references laid-out), whose references it runs too. Its traces are removed
    afterwards, unless a run failed or raised an alarm: then the references and that run's
    traces stay, to look at."""
    folder = os.path.join(work, point.name)
    os.makedirs(folder, exist_ok=True)
    detection.TRAINER = detection.Trainer(point.trainer, trainer_main(point.trainer), {}, {},
                                          "", point.dtypes, "")
    laid_out = sorted({layouts[layout] for layout in point.layouts}) if layouts else []
    records, keep = [], True
    try:
        detection.run_all(
            [reference(point, detection.reference_folder(folder, d, role), d, role)
             for d in point.dtypes for role in ("reference", "perturbed-reference")]
            + [reference(point, detection.reference_folder(folder, d, layout=ref), d,
                         "reference", ref) for d in point.dtypes for ref in laid_out], jobs)
        detection.run_all([distributed(point, folder, check, layout, d, records,
                                       layouts[layout] if layouts else None)
                           for d in point.dtypes for layout in point.layouts], jobs)
        keep = any("error" in r or alarm(r) for r in records)
    finally:
        if keep:
            print(f"{point.name}: a run failed or raised an alarm, traces kept in {folder}",
                  flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return records


# -- the fit -----------------------------------------------------------------------------------

AXES = ("hidden", "layers", "seq")


def per_iteration(r):
    return {int(i): e["value"] for i, e in r["per_iteration"].items()}


def families(r):
    """The highest tensor of each of FAMILIES in run record `r`. The first records of the sweep
    kept only the highest norm gradient (`norm_grads`), the highest other tensor (`others`) and
    the five highest (`top`); from those a family's highest is exact where it is among them,
    and otherwise (`rest` only) bounded by the fifth highest."""
    if "families" in r:
        return r["families"]
    known = [e for e in [r.get("norm_grads"), r.get("others")] + r.get("top", []) if e]
    out = {}
    for e in known:
        f = family_of(e)
        if f not in out or e["value"] > out[f]["value"]:
            out[f] = e
    for name in FAMILIES:
        if name not in out and r.get("top"):
            out[name] = dict(r["top"][-1], bound=True)
    return out


def family(name):
    """The highest of family `name` (FAMILIES) of a run, over its iterations, filed under the
    last iteration."""
    def values(r):
        e = families(r).get(name)
        return {ITERATIONS - 1: e["value"]} if e and not e.get("bound") else {}
    return values


def fit_points(records, dtype, layouts=AXIS, values=per_iteration):
    """(hidden, layers, seq, iteration, highest) of the fitted family: the GPT trainer at
    vocabulary FIT_VOCAB, per size and iteration the highest over `layouts` (the same layouts at
    every size: those run along the axes), `values` giving a run's highest per iteration."""
    worst = {}
    for r in records:
        if (r["trainer"] != "gpt" or r["vocab"] != FIT_VOCAB or r["dtype"] != dtype
                or "error" in r or r["layout"] not in layouts):
            continue
        for it, value in values(r).items():
            key = (r["hidden"], r["layers"], r["seq"], it)
            worst[key] = max(worst.get(key, 0.0), value)
    return [(*key, value) for key, value in sorted(worst.items()) if value > 0]


def fit(points, iteration=True):
    """Least squares of log(highest) on 1, log(hidden), log(layers), log(seq) and (with
    `iteration`) log(iteration + 1). Returns the coefficients, the rms residual (in log) and
    the number of points, or None when there are too few."""
    import numpy as np
    rows = [[1.0, math.log(h), math.log(depth), math.log(s)] + ([math.log(it + 1)] if iteration
                                                                 else [])
            for h, depth, s, it, _ in points]
    if len(rows) < len(rows[0]) + 3:  # fewer than 3 degrees of freedom: no fit
        return None
    a, y = np.array(rows), np.log([p[-1] for p in points])
    rank = np.linalg.matrix_rank(a)
    if rank < a.shape[1]:  # an axis not varied yet: no exponent for it
        return None
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    residual = float(np.sqrt(np.mean((a @ coef - y) ** 2)))
    return {"coef": [float(c) for c in coef], "rms_log": residual, "points": len(rows),
            "rank": int(rank)}


def predict(result, hidden, layers, seq, iteration):
    c = result["coef"]
    x = [1.0, math.log(hidden), math.log(layers), math.log(seq)] + (
        [math.log(iteration + 1)] if len(c) == 5 else [])
    return math.exp(sum(ci * xi for ci, xi in zip(c, x)))


def axis_slopes(points):
    """Along each axis from the base (hidden 128, 4 layers, sequence 64), the slope of
    log(highest) over log(axis) of the last iteration's highest: a one-axis view."""
    import numpy as np
    base = {"hidden": 128, "layers": 4, "seq": 64}
    last = max((p[3] for p in points), default=0)
    out = {}
    for i, axis in enumerate(AXES):
        line = [(p[i], p[4]) for p in points if p[3] == last and all(
            p[j] == base[other] for j, other in enumerate(AXES) if other != axis)]
        if len(line) >= 2:
            x, y = np.log([v for v, _ in line]), np.log([m for _, m in line])
            out[axis] = (float(np.polyfit(x, y, 1)[0]), sorted(line))
    return out


# -- the section -------------------------------------------------------------------------------

def _n(value):
    return detection._number(value) if value is not None else "-"


def _size(r):
    return (f"{r['trainer']} h{r['hidden']} L{r['layers']} s{r['seq']} v{r['vocab']}")


def current(r):
    """Whether record `r` was made by the trainers of commit 6b39f1f or later (layer norms in
    fp32, the perturbed reference's samples reordered), which changed the margins: only those
    records carry `families`."""
    return "families" in r


def against(r):
    """The reference record `r` was checked against: a layout, or "one-device" (the records
    of before --references have none)."""
    return r.get("reference", "one-device")


def section(records, command, seconds):
    records = [r for r in records if current(r) and against(r) == "one-device"]
    order = {}
    for layout in GPT_COMBOS + NATIVE["layouts"]:
        order.setdefault(layout, len(order))
    records = sorted(records, key=lambda r: (r["trainer"], r["hidden"], r["layers"], r["seq"],
                                             r["vocab"], order.get(r["layout"], 99)))
    dtypes = [d for d in ("fp32", "bf16", "fp8") if any(r["dtype"] == d for r in records)]
    lines = [
        "## Size sweep of clean runs (`examples/size_sweep.py`)", "",
        f"Made by `{command}` on {os.cpu_count()} CPU cores "
        f"({seconds / 60:.0f} min of runs in all, reruns included, shared with other work). "
        "Each row is a model "
        f"size and a bug-free layout, {ITERATIONS} iterations of 2 micro-batches (the GPT "
        "trainer 4 sequences per micro-batch, the torch-native one 8 per iteration); each "
        "cell is the **highest normalized error of any tensor** of that run (its margin to a "
        "false alarm: 1 is an alarm), then that tensor, its kind and iteration. Sizes: hidden "
        "h, L layers, sequence s, vocabulary v; heads of dimension 32, FFN 4h; the GPT "
        "trainer's last layer is a mixture of 4 experts. An `(alarm)` marks a run the checker "
        "flagged. Records made before commit 6b39f1f (the perturbed reference reorders its "
        "samples, the GPT trainer's layer norms compute in fp32) are left out: that commit "
        "changed the margins.", "",
        "| size | layout | " + " | ".join(dtypes) + " |",
        "|---|---|" + "---|" * len(dtypes)]
    by_row = {}
    for r in records:
        by_row.setdefault((_size(r), r["layout"]), {})[r["dtype"]] = r
    for (size, layout), cells in by_row.items():
        out = []
        for d in dtypes:
            r = cells.get(d)
            if r is None:
                out.append("")
            elif "error" in r:
                out.append("failed: " + r["error"].splitlines()[-1][:80].replace("|", "/"))
            else:
                h = r["highest"]
                text = (f"**{_n(h['value'])}** `{h['name']}` {h['kind']} it{h['iteration']}"
                        if h else "-")
                if alarm(r):
                    text += " (alarm)"
                if r.get("non_finite"):
                    text += f" ({r['non_finite']} non-finite)"
                if r.get("fp8_scale_highest") is not None:
                    text += f"; fp8 scales {_n(r['fp8_scale_highest'])}"
                out.append(text)
        lines.append(f"| {size} | {layout} | " + " | ".join(out) + " |")

    # per iteration and per family, the highest over the layouts
    lines += ["", "The highest over the layouts of each size, per iteration and per family of "
              "tensors: the norm weights' and biases' gradients (`param_grad`, `main_grad`; a "
              "sum over every token), the mixture of experts' tensors (router and experts: "
              "top-k routing is discontinuous), every other tensor (`<=`: the first records "
              "kept only the five highest tensors, and this family was not among them; the fits "
              "leave such bounds out):", "",
              "| size | dtype | it0 | it1 | it2 | norm grads | MoE | rest |",
              "|---|---|---|---|---|---|---|---|"]
    groups = {}
    for r in records:
        if "error" not in r:
            groups.setdefault((_size(r), r["dtype"]), []).append(r)
    for (size, dtype), rs in groups.items():
        its = [max((r["per_iteration"].get(str(i), {}).get("value", 0) for r in rs), default=0)
               for i in range(ITERATIONS)]
        fams = []
        for name in FAMILIES:
            es = [families(r).get(name) for r in rs]
            es = [e for e in es if e]
            best = max(es, key=lambda e: e["value"], default=None)
            fams.append("-" if best is None else
                        ("<= " if best.get("bound") else "") + _n(best["value"]))
        lines.append(f"| {size} | {dtype} | " + " | ".join(_n(v) for v in its) + " | "
                     + " | ".join(fams) + " |")

    # the fit
    lines += ["", "### How the margin grows", "",
              "Least squares, per dtype, of `log(highest)` on `log(hidden)`, `log(layers)`, "
              "`log(seq)` and `log(iteration + 1)`, over the GPT trainer's points of vocabulary "
              f"{FIT_VOCAB} (one point per size and iteration: the highest over the layouts "
              f"{', '.join(AXIS)}, run at every size; or of one of them): "
              "`highest ~ c * hidden^a * layers^b * seq^g * (it + 1)^i`. The extrapolation is "
              f"to hidden {TARGET['hidden']}, {TARGET['layers']} layers, sequence "
              f"{TARGET['seq']}, at iteration {ITERATIONS - 1} (the last measured), with the "
              "same 4 sequences per micro-batch. rms is the residual in log (0.3 is a factor "
              "1.35). The 3 iterations of a size are not independent points, and the highest "
              "of a run is the maximum over thousands of tensors: a noisy statistic, so the "
              "exponents are rough. The rows of one family of tensors (above) fit, without the "
              "iteration term, that family's highest: which of them the extrapolation "
              "follows.", "",
              "| dtype | tensors | layouts | points | a (hidden) | b (layers) | g (seq) | "
              "i (iteration) | rms | extrapolated highest | crosses 1 |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    fits = {}
    variants = [("all", "worst of " + "/".join(AXIS), AXIS, per_iteration, True)]
    variants += [("all", layout, (layout,), per_iteration, True) for layout in AXIS]
    variants += [(name, "worst of " + "/".join(AXIS), AXIS, family(name), False)
                 for name in FAMILIES]
    for dtype in dtypes:
        for tensors, label, layouts, values, with_iteration in variants:
            result = fit(fit_points(records, dtype, layouts, values), with_iteration)
            if result is None:
                continue
            fits[(dtype, tensors, label)] = result
            value = predict(result, TARGET["hidden"], TARGET["layers"], TARGET["seq"],
                            ITERATIONS - 1)
            c = result["coef"] + ([None] if not with_iteration else [])
            exps = " | ".join("-" if x is None else f"{x:.2f}" for x in c[1:])
            lines.append(f"| {dtype} | {FAMILIES.get(tensors, tensors)} | {label} | "
                         f"{result['points']} (rank {result['rank']}) | {exps} | "
                         f"{result['rms_log']:.2f} | {_n(value)} | "
                         f"{'**yes**' if value > 1 else 'no'} |")
    lines += ["", "One axis at a time from the base (hidden 128, 4 layers, sequence 64): the "
              f"slope of `log(highest)` of iteration {ITERATIONS - 1} over `log(axis)` "
              f"(the highest over {', '.join(AXIS)}), with the points:", "",
              "| dtype | axis | slope | (value, highest) |", "|---|---|---|---|"]
    for dtype in dtypes:
        for axis, (slope, line) in axis_slopes(fit_points(records, dtype)).items():
            lines.append(f"| {dtype} | {axis} | {slope:.2f} | "
                         + ", ".join(f"({v}, {_n(m)})" for v, m in line) + " |")
    checks = [r for r in records if "error" not in r and r["highest"]
              and (r["trainer"] != "gpt" or r["vocab"] != FIT_VOCAB)
              and r["layout"] in AXIS + NATIVE["layouts"]]
    if checks and fits:
        lines += ["", "The points outside the fit against its prediction (the fit of the worst of "
                  f"{', '.join(AXIS)}; the highest of the last iteration over those layouts, or "
                  "over the torch-native trainer's):", "",
                  "| size | dtype | measured | predicted |", "|---|---|---|---|"]
        seen = {}
        for r in checks:
            key = (_size(r), r["dtype"], r["hidden"], r["layers"], r["seq"])
            value = r["per_iteration"].get(str(ITERATIONS - 1), {}).get("value", 0)
            seen[key] = max(seen.get(key, 0), value)
        for (size, dtype, h, depth, s), value in seen.items():
            worst = fits.get((dtype, "all", "worst of " + "/".join(AXIS)))
            if worst:
                lines.append(f"| {size} | {dtype} | {_n(value)} | "
                             f"{_n(predict(worst, h, depth, s, ITERATIONS - 1))} |")
    ran = {r_name(r) for r in records}
    missing = [p.name for p in PLAN if p.name not in ran]
    lines += ["", "### In short", ""] + summary(records, fits)
    if missing:
        lines.append("- Not run yet with the trainers of commit 6b39f1f (the sweep resumes "
                     "where it stopped; `--redo` reruns the sizes of older records): "
                     + ", ".join(f"`{m}`" for m in missing) + ".")
    return "\n".join(lines), fits


def summary(records, fits):
    """Sentences the numbers above say: per dtype the highest measured margin and where, and
    which extrapolations cross 1."""
    out = []
    for dtype in ("fp32", "bf16", "fp8"):
        rs = [r for r in records if r["dtype"] == dtype and r.get("highest")]
        if not rs:
            continue
        r = max(rs, key=lambda r: r["highest"]["value"])
        h = r["highest"]
        out.append(f"- {dtype}: highest measured {_n(h['value'])} ({_size(r)}, {r['layout']}, "
                   f"`{h['name']}` {h['kind']}, iteration {h['iteration']}; "
                   f"{FAMILIES[family_of(h)]}).")
    at_target = {key: predict(f, TARGET["hidden"], TARGET["layers"], TARGET["seq"],
                              ITERATIONS - 1) for key, f in fits.items()}
    crossing = [f"{dtype} {FAMILIES.get(tensors, 'all tensors')} ({label}): {_n(value)}"
                for (dtype, tensors, label), value in at_target.items() if value > 1]
    out.append("- The extrapolation to hidden {hidden}, {layers} layers, sequence {seq} crosses "
               "1 for: ".format(**TARGET) + ("; ".join(crossing) if crossing else "none") + ".")
    return out


def _cell(r):
    """A run's highest normalized error and its tensor, in a table's cell."""
    if r is None:
        return "-"
    if "error" in r:
        return "failed: " + r["error"].splitlines()[-1][:80].replace("|", "/")
    h = r["highest"]
    if not h:
        text = "-"
    elif h["value"] == 0:  # the first of the tensors, all equal: no tensor to name
        text = "**0** (no tensor differs)"
    else:
        text = f"**{_n(h['value'])}** `{h['name']}` {h['kind']} it{h['iteration']}"
    if alarm(r):
        text += f" (**alarm**, exit code {r['exit_code']})"
    if r.get("non_finite"):
        text += f" ({r['non_finite']} non-finite)"
    if r.get("fp8_scale_highest") is not None:
        text += f"; fp8 scales {_n(r['fp8_scale_highest'])}"
    if (r.get("coverage") or {}).get("blind"):
        text += f"; {r['coverage']['blind']} blind"
    return text


def _alarm(r):
    """An alarm of the laid-out section: the run, its highest tensor and, where the perturbed
    reference was rejected for it, the threshold it was judged by instead."""
    h = r.get("highest") or {}
    text = f"{_size(r)} {r['layout']} vs {against(r)} {r['dtype']} (exit code {r['exit_code']}"
    if h:
        text += f", highest {_n(h['value'])} `{h['name']}` {h['kind']} it{h['iteration']}"
    if h.get("perturbation_error") is not None:
        text += (f": the perturbed reference moved it by {_n(h['perturbation_error'])} of this "
                 "reference, too far to be believed, so no perturbation threshold follows and it "
                 f"was judged by its {h['method']} threshold, {_n(h['threshold'])}")
    return text + ")"


def laid_out_section(records, compare, command, seconds, compare_name):
    """The section of --references laid-out: per size, layout and dtype the run against its
    laid-out reference, beside the same run against the single-device reference and the cell
    of the single-device sweep (`compare`, its records)."""
    order = {}
    for layout in GPT_COMBOS + NATIVE["layouts"]:
        order.setdefault(layout, len(order))
    dtype_order = {"fp32": 0, "bf16": 1, "fp8": 2}
    key = (lambda r: (r["trainer"], r["hidden"], r["layers"], r["seq"], r["vocab"],
                      order.get(r["layout"], 99), dtype_order.get(r["dtype"], 9)))
    laid = sorted((r for r in records if against(r) != "one-device"), key=key)
    same_run = {(r_name(r), r["layout"], r["dtype"]): r for r in records
                if against(r) == "one-device"}
    sweep = {(r_name(r), r["layout"], r["dtype"]): r for r in compare
             if current(r) and against(r) == "one-device"}
    lines = [
        "## Size sweep against references on several ranks "
        "(`examples/size_sweep.py --references laid-out`)", "",
        f"Made by `{command}` on {os.cpu_count()} CPU cores ({seconds / 60:.0f} min of runs "
        "in all, shared with other work). As in [the size sweep](#size-sweep-of-clean-runs-"
        "examplessize_sweeppy), each row is a bug-free run of a model size and layout, "
        f"{ITERATIONS} iterations of 2 micro-batches, and a cell is the **highest normalized "
        "error of any tensor** (1 is an alarm), that tensor, its kind and iteration. Here each "
        "run is checked against a reference laid out over ranks (`train.py --role reference "
        "--config`), in the layout its trainer's `detect.py` gives it (`reference_layouts`, "
        "as `detect.py --references laid-out`; the same layout stands for a trusted commit); "
        "the perturbed reference stays on one device. Columns: **laid-out reference**: that "
        "check; **same run, one-device reference**: the same trace checked against the "
        "single-device reference of the same sweep (both measured here, together: only the "
        "reference differs); **one-device sweep**: the cell of the same size, layout and dtype "
        f"in the size sweep's results (`{compare_name}`: another run, measured earlier, on the "
        "checker and trainers of then), `-` where it has none. **0** (no tensor differs): the "
        "run and its reference in the same layout are bitwise equal, as a deterministic run "
        "must be. fp8 scales: the highest `scale_inv` difference over its tolerance of any "
        "tensor, judged only where the copies of a tensor disagree ([thresholds.md](thresholds"
        ".md#fp8-scales)): above 1 on copies that agree is a difference of values, no alarm. "
        "`N blind`: tensors compared with a threshold of 1 or more (the checker's exit code 4, "
        "which counts as no alarm when nothing else was left out, as in `detect.py`); an "
        "**alarm** is any other exit code than 0.", "",
        "| size | layout | reference layout | dtype | laid-out reference | same run, one-device "
        "reference | one-device sweep |",
        "|---|---|---|---|---|---|---|"]
    for r in laid:
        k = (r_name(r), r["layout"], r["dtype"])
        lines.append(f"| {_size(r)} | {r['layout']} | {against(r)} | {r['dtype']} | "
                     f"{_cell(r)} | {_cell(same_run.get(k))} | {_cell(sweep.get(k))} |")
    done = [r for r in laid if r.get("highest")]
    alarms = [r for r in records if alarm(r)]
    failed = [r for r in records if "error" in r]
    lines += ["", "### In short", ""]
    if done:
        r = max(done, key=lambda r: r["highest"]["value"])
        h = r["highest"]
        lines.append(f"- Highest against a laid-out reference, over all {len(laid)} runs: "
                     f"{_n(h['value'])} ({_size(r)}, {r['layout']} vs {against(r)}, "
                     f"{r['dtype']}, `{h['name']}` {h['kind']}, iteration {h['iteration']}).")
        ones = [x for x in same_run.values() if x.get("highest")]
        if ones:
            o = max(ones, key=lambda x: x["highest"]["value"])
            lines.append(f"- The same runs against the single-device reference: highest "
                         f"{_n(o['highest']['value'])} ({_size(o)}, {o['layout']}, "
                         f"{o['dtype']}).")
    lines.append("- Alarms: " + ("; ".join(_alarm(r) for r in alarms) if alarms else "none")
                 + "." + (f" Failed runs: {len(failed)}." if failed else ""))
    # runs whose kept traces were checked again by a later checker: what they said before
    rechecked = [r for r in records if r.get("before_recheck")]
    if rechecked:
        lines.append("- Checked again from their kept traces after " + rechecked[0]["recheck"]
                     + ", and no alarm since; before, " + "; ".join(
                         _alarm({**r, **r["before_recheck"]}) for r in rechecked) + ".")
    ran = {r_name(r) for r in laid}
    missing = [PLAN[i].name for i in LAID_OUT if PLAN[i].name not in ran]
    if missing:
        lines.append("- Not run: " + ", ".join(f"`{m}`" for m in missing) + ".")
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------------

def load(path):
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"records": [], "seconds": 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", help="the ttrace-check binary")
    ap.add_argument("--results", required=True,
                    help="JSON of the raw results: read (sizes there are skipped) and updated")
    ap.add_argument("--table", help="write the section here (e.g. docs/detection.md)")
    ap.add_argument("--work", help="folder for the traces (default: a temporary one)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    ap.add_argument("--points", help="comma-separated indices of PLAN to run (default: all)")
    ap.add_argument("--redo", action="store_true",
                    help="run the chosen points even if --results has them (replacing them)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    ap.add_argument("--fit-only", action="store_true",
                    help="run nothing: fit and write the section from --results")
    ap.add_argument("--references", choices=("one-device", "laid-out"), default="one-device",
                    help="one-device: each run against the single-device reference; laid-out: "
                         "against a reference laid out as the trainer's reference_layouts say "
                         "and the single-device one (default plan LAID_OUT; its own --results "
                         "and section)")
    ap.add_argument("--compare", default=os.path.join(os.path.dirname(HERE), "docs",
                                                      "size_sweep.json"),
                    help="with --references laid-out: the single-device sweep's results, "
                         "for comparison (default docs/size_sweep.json)")
    args = ap.parse_args()
    laid_out = args.references == "laid-out"
    if args.list:
        for i, p in enumerate(PLAN):
            print(i, p.name, ",".join(p.layouts), ",".join(p.dtypes))
        return 0
    data = load(args.results)
    if not args.fit_only:
        if not args.check:
            ap.error("--check is required unless --fit-only")
        check = os.path.abspath(args.check)
        work = args.work or tempfile.mkdtemp(prefix="ttrace-sweep-")
        done = {r_name(r) for r in data["records"]}
        indices = ([int(i) for i in args.points.split(",")] if args.points
                   else LAID_OUT if laid_out else range(len(PLAN)))
        chosen = [PLAN[i] for i in indices]
        import torch  # noqa: F401  (the forked runs inherit it)
        layouts = {}
        for point in chosen:
            if point.name in done and not args.redo:
                print(f"{point.name}: in {args.results} already, skipped")
                continue
            if laid_out:
                if point.trainer not in layouts:
                    layouts[point.trainer] = reference_layouts(point.trainer)
                unknown = set(point.layouts) - set(layouts[point.trainer])
                if unknown:
                    ap.error(f"{point.trainer}/detect.py gives no reference layout for "
                             f"{sorted(unknown)}")
            start = time.time()
            records = run_point(point, work, check, args.jobs, layouts.get(point.trainer))
            seconds = time.time() - start
            data["records"] = [r for r in data["records"] if r_name(r) != point.name] + records
            data["seconds"] += seconds
            with open(args.results, "w") as f:
                json.dump(data, f, indent=1)
            mine = [r for r in records if (against(r) != "one-device") == laid_out]
            worst = max((r["highest"]["value"] for r in mine if r.get("highest")), default=0)
            failed = sum(1 for r in mine if "error" in r)
            alarms = sum(1 for r in records if alarm(r))
            print(f"{point.name}: {len(mine)} runs, highest {worst:.3g}, {failed} failed, "
                  f"{alarms} checks with an alarm, {seconds:.0f} s", flush=True)
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if laid_out:
        compare = load(args.compare)["records"]
        command = ("examples/size_sweep.py --references laid-out --check "
                   f"build/app/ttrace-check --results "
                   f"{os.path.relpath(args.results, os.path.dirname(HERE))} "
                   "--table docs/detection.md")
        text = laid_out_section(data["records"], compare, command, data["seconds"],
                                os.path.relpath(args.compare, os.path.dirname(HERE)))
        name = "size_sweep_laid_out_references"
    else:
        command = ("examples/size_sweep.py --check build/app/ttrace-check --results "
                   "docs/size_sweep.json --table docs/detection.md")
        text, fits = section(data["records"], command, data["seconds"])
        name = "size_sweep"
    if args.table:
        detection.write_section(args.table, name, text)
    else:
        print(text)
    return 0


def r_name(r):
    return Point(r["trainer"], r["hidden"], r["layers"], r["seq"], r["vocab"]).name


if __name__ == "__main__":
    sys.exit(main())
