"""The detection test of a trainer's bug corpus, shared by examples/gpt, examples/torch_native
and examples/torchtitan: runs the trainer for every bug in every configuration and recipe it
shows in and for every configuration without a bug, checks each run with ttrace-check against
a shared reference and perturbed reference of its recipe, and asserts that

- a bug is found, with the root cause at the bug's module (its bugs.py) and, where the bug is
  rank-specific, the faulty shard on the expected ranks;
- a run without a bug raises no alarm;
- no trusted run says it cannot be trusted (the references are right by construction: a
  warning of theirs against themselves is the checker's false alarm).

It writes the outcome as a Markdown table, the trainer's section of docs/detection.md, and
exits 1 when an expectation fails. Each trainer's detect.py describes it with a Trainer and
calls main()."""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass


@dataclass(frozen=True)
class Trainer:
    """What the harness needs of a trainer: its name (the section of docs/detection.md), its
    main(argv), its bug corpus and layouts (bugs.py), the recipes it runs in, and one
    Markdown sentence on what a row is; replay_routing: its perturbed reference and
    distributed runs replay the reference's routing (train.py --replay-routing); ci_dtypes: the
    recipes of the CI subset where fewer than all (CI's time); reference_layouts: for
    `--references laid-out`, the layout of each configuration's reference on several ranks
    (train.py --role reference --config), another layout or the same one (a trusted commit);
    recipe_configs: the configurations a recipe runs in, where fewer than all (a recipe the
    trainer's framework cannot run in every layout on the CPU)."""
    name: str
    train_main: object
    bugs: dict
    configs: dict
    parameter_gradients: str
    dtypes: tuple
    about: str
    replay_routing: bool = False
    ci_dtypes: tuple = None
    reference_layouts: dict = None
    recipe_configs: dict = None

    def runs_in(self, dtype, config):
        """Whether recipe `dtype` runs in configuration `config`."""
        return config in (self.recipe_configs or {}).get(dtype, (config,))


TRAINER = None  # the Trainer main() runs, for the forked children and the cases



def _redirect(log):
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)


def fork_train(argv, log):
    """Runs train.py's main(argv) in a forked child (which inherits the imported torch: an
    import costs more than a run) with its output in `log`; returns the child's pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        _redirect(log)
        TRAINER.train_main(argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def spawn(argv, log):
    """Starts program `argv` with its output in `log`; returns its pid."""
    pid = os.fork()
    if pid:
        return pid
    try:
        _redirect(log)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)


def train_args(out, dtype, role="distributed", config=None, bug=None, work=None):
    """The trainer's arguments for one run (a reference's `config` lays it out over ranks);
    `work` holds the reference whose routing a replaying trainer's other runs take."""
    shutil.rmtree(out, ignore_errors=True)  # no rank files of an earlier run may survive
    argv = ["--role", role, "--out", out, "--dtype", dtype]
    if TRAINER.replay_routing and role != "reference":
        argv += ["--replay-routing", os.path.join(work, "ref-" + dtype)]
    if config:
        argv += ["--config", config]
    if bug:
        argv += ["--bug", bug]
    return argv


def run_all(tasks, jobs):
    """Runs `tasks` with at most `jobs` child processes at a time. A task is a generator that
    yields the pids of its children one after another and is sent each one's exit code."""
    pending, running = list(tasks), {}

    def advance(task, code):
        try:
            running[task.send(code)] = task
        except StopIteration:
            pass

    while pending or running:
        while pending and len(running) < jobs:
            advance(pending.pop(0), None)
        if running:
            pid, status = os.wait()
            if pid in running:
                advance(running.pop(pid), os.waitstatus_to_exitcode(status))


def references(work, dtype, layouts=()):
    """Tasks for run_all: the reference and the perturbed reference of `dtype` on one device,
    one after the other when the perturbed reference replays the reference's routing, and a
    reference in each of `layouts`."""
    ref, pert = (reference(work, dtype, role) for role in ("reference", "perturbed-reference"))
    laid_out = [reference(work, dtype, "reference", layout) for layout in layouts]
    if TRAINER.replay_routing:
        return [_one_after_the_other(ref, pert)] + laid_out
    return [ref, pert] + laid_out


def _one_after_the_other(*tasks):
    for task in tasks:
        yield from task


def reference_folder(work, dtype, role="reference", layout=None):
    """Where a reference of `dtype` goes: on one device, or laid out as `layout`."""
    name = {"reference": "ref-", "perturbed-reference": "pert-"}[role] + dtype
    return os.path.join(work, name + (f"-{layout}" if layout else ""))


def reference(work, dtype, role, layout=None):
    out = reference_folder(work, dtype, role, layout)
    code = yield fork_train(train_args(out, dtype, role, config=layout, work=work), out + ".log")
    if code != 0:
        raise RuntimeError(f"the {role} run failed (see {out}.log)")


def no_alarm(exit_code, coverage):
    """No bug found: exit code 0, or 4 where the only tensors not effectively checked are
    blind ones, compared with a threshold of 1 or more (docs/thresholds.md): the fp8 recipe's
    noisiest gradients. `coverage`: the report's (or None)."""
    if exit_code == 0:
        return True
    coverage = coverage or {}
    return (exit_code == 4 and coverage.get("blind", 0) > 0
            and not coverage.get("not_captured") and not coverage.get("not_comparable")
            and not coverage.get("not_in_reference"))


class Case:
    """One distributed run and its check."""

    def __init__(self, config, dtype, bug=None, reference=None):
        """reference: the layout of a reference on several ranks, None for one device."""
        self.config, self.dtype, self.bug, self.reference = config, dtype, bug, reference
        self.trace = f"{bug or 'clean'}-{config}-{dtype}"  # the run's folder, whatever the check
        self.name = self.trace + (f"-vs-{reference}" if reference else "")
        self.exit_code = None
        self.report = None
        self.failures = []

    def same_run(self, other):
        return self.trace == other.trace

    def mislocalization(self):
        """Why the bug is found but another root cause named in this recipe (against this
        layout of a reference on several ranks, where the corpus says so), or None."""
        known = TRAINER.bugs[self.bug].mislocalized
        return known.get(f"{self.dtype} vs {self.reference}") or known.get(self.dtype)

    def expected(self):
        bug = TRAINER.bugs.get(self.bug)
        if bug is None:
            return None, None
        return bug.root_cause, bug.expected_ranks(TRAINER.configs[self.config])

    def check(self, work, check):
        """Steps of a task for run_all: the check of this case's run, already trained."""
        folder = os.path.join(work, self.trace)
        report = os.path.join(work, self.name + ".json")
        refs = (reference_folder(work, self.dtype, layout=self.reference),
                reference_folder(work, self.dtype, "perturbed-reference"))
        self.exit_code = yield spawn([check, folder, refs[0], "--perturbed", refs[1],
                                      "--no-cache", "--quiet", "--json", report],
                                     os.path.join(work, self.name + ".check.log"))
        if os.path.exists(report):
            with open(report) as f:
                self.report = json.load(f)
        self.judge()

    # -- what the checker said -----------------------------------------------------------------

    def localization(self):
        return (self.report or {}).get("localization") or {}

    def first_faulty(self):
        first = self.localization().get("first_faulty")
        if not first:
            return None, None
        tensor = self.report["tensors"][first["result"]]
        return first["tensor"], tensor["normalized_error"]

    def first_faulty_replicas_differ(self):
        first = self.localization().get("first_faulty")
        return bool(first and self.report["tensors"][first["result"]]["replica_mismatches"])

    def first_faulty_recomputation_differs(self):
        first = self.localization().get("first_faulty")
        return bool(first and self.report["tensors"][first["result"]]["recomputation_mismatches"])

    def first_faulty_scale_mismatch(self):
        """The first faulty tensor's worst fp8 scale mismatch (the report's), or None."""
        first = self.localization().get("first_faulty")
        scales = first and self.report["tensors"][first["result"]].get("fp8_scales")
        return scales["mismatches"][0] if scales and scales["mismatches"] else None

    def highest_scale_difference(self):
        """The largest fp8 scale difference over its tolerance of any tensor the scale check
        judges (its copies disagree: thresholds.md, "fp8 scales"), or None."""
        margins = [s["max_difference"] / s["tolerance"] for s in
                   (t.get("fp8_scales") for t in self.report["tensors"])
                   if s and not s.get("copies_agree")
                   and isinstance(s["max_difference"], (int, float))
                   and isinstance(s["tolerance"], (int, float)) and s["tolerance"] > 0]
        return max(margins) if margins else None

    def root_cause(self):
        cause = self.localization().get("root_cause")
        return cause["module"] if cause else None

    def root_cause_kind(self):
        cause = self.localization().get("root_cause")
        return self.report["tensors"][cause["output"]["result"]]["key"]["kind"] if cause else None

    def root_cause_matches(self, module):
        """module: the module ttrace must name, a tuple of them (the bug is in each), or the
        trainer's parameter_gradients (any parameter gradient)."""
        if module == TRAINER.parameter_gradients:
            return self.root_cause_kind() in ("param_grad", "main_grad")
        return self.root_cause() in (module if isinstance(module, tuple) else (module,))

    def gradient_from(self):
        """Where the root cause's faulty output gradient came from: a module, "loss", or None."""
        source = (self.localization().get("root_cause") or {}).get("gradient_from")
        if not source:
            return None
        return "loss" if source["source"] == "loss" else source["module"]

    def faulty_ranks(self):
        shard = self.localization().get("faulty_shard")
        return sorted(shard["ranks"]) if shard else None

    def blind(self):
        return ((self.report or {}).get("coverage") or {}).get("blind", 0)

    def no_alarm(self):
        return no_alarm(self.exit_code, (self.report or {}).get("coverage"))

    def trusted_run_doubts(self):
        """What the trusted runs, correct by construction here, say against themselves
        (report-format.md, the runs' own diagnostics with a code): "reference: fp8_scales_differ
        x3"."""
        doubts = []
        for role in ("reference", "perturbed"):
            run = ((self.report or {}).get("runs") or {}).get(role) or {}
            codes = [d["code"] for d in run.get("diagnostics") or [] if d.get("code")]
            doubts += [f"{role}: {code} x{codes.count(code)}" for code in sorted(set(codes))]
        return doubts

    def judge(self):
        module, ranks = self.expected()
        if self.report is None:
            self.failures.append(f"no report (exit code {self.exit_code})")
            return
        for doubt in self.trusted_run_doubts():
            self.failures.append(f"a trusted run cannot be trusted, it says ({doubt})")
        if self.bug is None:
            if not self.no_alarm():
                count = self.localization().get("faulty_count")
                self.failures.append(f"false alarm: exit code {self.exit_code}, {count} faulty "
                                     f"tensors, first {self.first_faulty()[0]}")
            return
        if TRAINER.bugs[self.bug].known_miss:
            if not self.no_alarm():  # like a strict expected failure
                self.failures.append(f"a known miss is now found (exit code {self.exit_code}): "
                                     "update bugs.py and the docs")
            return
        if self.exit_code != 1:
            self.failures.append(f"not detected: exit code {self.exit_code}")
            return
        if self.mislocalization():  # like a strict expected failure
            if self.root_cause_matches(module):
                self.failures.append(f"the known {self.dtype} mislocalization is now right: "
                                     "update bugs.py and the docs")
            return
        if not self.root_cause_matches(module):
            self.failures.append(f"root cause {self.root_cause()} ({self.root_cause_kind()}), "
                                 f"expected {module}")
        if ranks is not None and not set(self.faulty_ranks() or []) <= set(ranks):
            self.failures.append(f"faulty ranks {self.faulty_ranks()}, expected among {ranks}")
        source = TRAINER.bugs[self.bug].gradient_from
        if source and self.gradient_from() != source:
            self.failures.append(f"gradient said to come from {self.gradient_from()}, "
                                 f"expected {source}")

    def row(self):
        module, ranks = self.expected()
        tensor, normalized = self.first_faulty()
        detected = self.exit_code == 1 if self.bug else self.no_alarm()
        if self.bug is None:
            localized = "-"
        elif TRAINER.bugs[self.bug].known_miss:
            localized = "known limit: " + TRAINER.bugs[self.bug].known_miss
        elif self.mislocalization():
            localized = f"no (`{self.root_cause()}`), known limit: " + self.mislocalization()
        else:
            localized = "yes" if detected and not self.failures else "no"
            localized += f" (`{self.root_cause()}`"
            if ranks is not None:
                localized += f", ranks {self.faulty_ranks()}"
            if self.gradient_from():
                localized += f", gradient from `{self.gradient_from()}`"
            localized += ")"
        error = "-" if normalized is None else _number(normalized)
        if self.first_faulty_replicas_differ():
            error += " (replicas differ)"
        if self.first_faulty_recomputation_differs():
            error += " (recomputation differs)"
        scale = self.report and self.first_faulty_scale_mismatch()
        if scale and scale.get("across_reference_blocks"):
            error += " (fp8 scale blocks across the reference's)"
        elif scale:
            error += f" (fp8 scale_inv {_number(scale['ratio'])}x)"
        known_miss = self.bug is not None and TRAINER.bugs[self.bug].known_miss
        if (self.bug is None or known_miss) and self.report:
            errors = [t["normalized_error"] for t in self.report["tensors"]]
            finite = [e for e in errors if isinstance(e, (int, float))]
            if finite:  # how far the cleanest alarm would be: the worst tensor
                error = f"highest {_number(max(finite))}"
            if self.highest_scale_difference() is not None:
                error += f"; fp8 scales {_number(self.highest_scale_difference())}"
            if self.blind():
                error += f"; {self.blind()} blind"
        verdict = "yes" if detected else "NO"
        if self.bug is None:
            verdict += " (no alarm)"
        elif known_miss:
            verdict = "no, as expected" if not detected else "YES: update the known limit"
        config = self.config + (f" vs `{self.reference}`" if self.reference else "")
        return (f"| {self.bug or '(none)'} | {config} | {self.dtype} | {verdict} | "
                f"{localized} | {error} | {f'`{tensor}`' if tensor else '-'} |")


def train_and_check(checks, work, check):
    """A task for run_all: one training run, then each of `checks` (cases of that run, each
    against its own reference)."""
    first = checks[0]
    folder = os.path.join(work, first.trace)
    code = yield fork_train(train_args(folder, first.dtype, config=first.config, bug=first.bug,
                                       work=work), folder + ".log")
    if code != 0:
        for case in checks:
            case.failures.append(f"the trainer failed (see {folder}.log)")
        return
    for case in checks:
        yield from case.check(work, check)


def _number(value):
    """JSON numbers of the report; NaN and infinities come as strings."""
    return value if isinstance(value, str) else f"{value:.3g}"


def cases(dtypes, bug_names, config_names, layouts):
    """Every bug in every configuration and recipe it shows in, every configuration clean;
    `layouts`: the reference's layout per configuration, none for a single-device one."""
    out = [Case(c, d, reference=layouts.get(c)) for d in dtypes for c in config_names
           if TRAINER.runs_in(d, c)]
    for d in dtypes:
        for name in bug_names:
            if d in TRAINER.bugs[name].dtypes:
                out += [Case(c, d, name, layouts.get(c)) for c in TRAINER.bugs[name].configs
                        if c in config_names and TRAINER.runs_in(d, c)]
    return out


def ci_cases(dtypes, bug_names, config_names, layouts):
    """The representative subset CI runs (`--subset ci`): each configuration once without a
    bug and each bug once, the recipes and the bug's configurations taken in turn, so that
    every recipe and configuration runs both clean and buggy somewhere. The whole corpus
    (cases()) is the default."""
    configs = [c for c in TRAINER.configs if c in config_names]
    out = [Case(c, dtypes[i % len(dtypes)], reference=layouts.get(c))
           for i, c in enumerate(configs)]
    out += [Case(configs[0], d, reference=layouts.get(configs[0]))
            for d in dtypes[len(configs):] if configs]  # more recipes
    for i, name in enumerate(bug_names):
        bug = TRAINER.bugs[name]
        recipes = [d for d in dtypes if d in bug.dtypes]
        places = [c for c in bug.configs if c in config_names]
        if recipes and places:
            config = places[i % len(places)]
            out.append(Case(config, recipes[i % len(recipes)], name, layouts.get(config)))
    return out


PREAMBLE = """# Detection of the bug corpora

Generated by each trainer's `detect.py --check build/app/ttrace-check --table
docs/detection.md` (`examples/run-corpora.sh` runs all four in full; CTest's
`gpt_detection`, `torch_native_detection`, `torchtitan_detection` and
`torchtitan_moe_detection` run each one's representative subset, `--subset ci`); do not edit
by hand: each writes its own section. Each row
is one run of the trainer checked by `ttrace-check` against the single-device reference and
the perturbed reference of the same dtype, or, in the sections "against references on several
ranks" (`--references laid-out`, or `both` for both sections from the same runs; CTest's
`torch_native_detection` runs the first way, `gpt_detection` the second), against a reference
laid out over ranks. The bugs are described in [capture.md](capture.md#the-bug-corpus). Two more sections
say how far the tolerances can be trusted: [sensitivity](#sensitivity-the-smallest-error-ttrace-sees),
written by `examples/sensitivity.py` (the smallest error ttrace sees, per dtype and tensor
kind), and [the size sweep](#size-sweep-of-clean-runs-examplessize_sweeppy), written by
`examples/size_sweep.py` (clean runs at growing model sizes: the margin to a false alarm, its
fitted growth and its extrapolation to hidden 8192 and 80 layers).

- **detected**: the checker's verdict is right: a bug found (exit code 1) for a buggy run, no
  alarm (exit code 0) for a clean one; a bug kept as a known limit (`Bug.known_miss`) must stay
  unseen, like a strict expected failure;
- **localized**: the root-cause module is the bug's own (one of them, where the bug is in
  several) and, for a rank-specific bug, the faulty shard lies on the ranks the bug runs on (the
  named module and ranks in brackets); a recipe kept as a known mislocalization
  (`Bug.mislocalized`) must find the bug and name another module, like a strict expected
  failure;
- **normalized error**: of the first faulty tensor (relative error / threshold; above 1 is a
  bug); "replicas differ" when copies that must be bitwise identical are not, "recomputation
  differs" when activation checkpointing recomputed the forward differently, "fp8
  scale_inv" with the ratio to the reference's when an fp8 shard carries another scale than the
  whole tensor's, and "fp8 scale blocks across the reference's" when its scale blocks run along
  another axis than the reference's: each makes a tensor faulty whatever its error. For a clean run or a known
  limit, the highest normalized error of any tensor: the margin to an alarm; in fp8 also the
  highest fp8 scale difference over its tolerance among the tensors the scale check judges
  (those whose copies carry different scales: [thresholds.md](thresholds.md#fp8-scales);
  none in a clean run), and "N blind" where N tensors were compared with a threshold of 1
  or more ([thresholds.md](thresholds.md#blind-tensors)): the checker
  then says "no bug in what was compared" (exit code 4), which counts as no alarm when
  nothing else was left out.

"""


LAID_OUT_ABOUT = """{title} against references on several ranks

The same corpus, each run checked against a reference laid out over ranks
(`--references laid-out`): the configuration is the distributed run's, then the reference's
layout after "vs" (the same layout stands for a trusted commit); the perturbed reference runs on
one device ([checker.md](checker.md#a-reference-on-several-ranks)). In the fp8 recipes the
scale check holds each shard to the whole tensor's scales assembled from the reference's pieces
([thresholds.md](thresholds.md#a-reference-laid-out-over-ranks))."""


def table(done, seconds, subset, laid_out, shared=False):
    """This trainer's section of docs/detection.md; shared: `seconds` also ran the other
    section's checks (`--references both`)."""
    title = TRAINER.about.split("\n", 1)[0]  # the trainer's own heading
    lines = [LAID_OUT_ABOUT.format(title=title) if laid_out else TRAINER.about, "",
             "| bug | configuration | dtype | detected | localized | normalized error | first "
             "faulty tensor |",
             "|---|---|---|---|---|---|---|"]
    lines += [c.row() for c in done]
    failed = sum(1 for c in done if c.failures)
    which = " of the CI subset (`--subset ci`)" if subset == "ci" else ""
    both = ", with the other section's checks of the same runs" if shared else ""
    lines += ["", f"{len(done)} runs{which}, {failed} failed expectations ({seconds:.0f} s on "
              f"{os.cpu_count()} cores{both})."]
    return "\n".join(lines)


def write_section(path, name, section):
    """Writes `section` as trainer `name`'s part of the file at `path`, keeping the others."""
    sections = {}
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
        for part in text.split("<!-- BEGIN ")[1:]:
            key, rest = part.split(" -->\n", 1)
            sections[key] = rest.split(f"\n<!-- END {key} -->", 1)[0]
    sections[name] = section
    with open(path, "w") as f:
        f.write(PREAMBLE + "".join(f"<!-- BEGIN {key} -->\n{body}\n<!-- END {key} -->\n\n"
                                   for key, body in sections.items()).rstrip("\n") + "\n")


def main(trainer):
    global TRAINER
    TRAINER = trainer
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", required=True, help="the ttrace-check binary")
    ap.add_argument("--work", help="folder for the traces and reports (default: a temporary one)")
    ap.add_argument("--table", help="write the Markdown table here (e.g. docs/detection.md)")
    ap.add_argument("--dtypes", help="comma-separated recipes (default: the trainer's, for "
                                     "--subset ci its CI recipes)")
    ap.add_argument("--bugs", default=",".join(TRAINER.bugs), help="comma-separated bug names")
    ap.add_argument("--configs", default=",".join(TRAINER.configs), help="comma-separated configurations")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="runs at a time (default: one per core)")
    ap.add_argument("--subset", choices=("all", "ci"), default="all",
                    help="all: every bug in every configuration and recipe it shows in, and "
                         "every configuration clean in every recipe; ci: each configuration "
                         "once clean and each bug once, recipes in turn (CTest runs it)")
    ap.add_argument("--references", choices=("one-device", "laid-out", "both"),
                    default="one-device",
                    help="one-device: every run against the single-device reference; laid-out: "
                         "against a reference on several ranks, in the layout the trainer's "
                         "reference_layouts gives each configuration (the perturbed reference "
                         "stays on one device); both: each run trained once and checked both "
                         "ways, each way with its own section of the table")
    args = ap.parse_args()
    if args.references != "one-device" and not TRAINER.reference_layouts:
        ap.error(f"the {TRAINER.name} trainer has no reference_layouts")
    # The sections to write: whether each is against laid-out references.
    ways = {"one-device": (False,), "laid-out": (True,), "both": (False, True)}[args.references]
    ci = args.subset == "ci" and TRAINER.ci_dtypes
    dtypes = (args.dtypes or ",".join(TRAINER.ci_dtypes if ci else TRAINER.dtypes)).split(",")
    bug_names = [b for b in args.bugs.split(",") if b]
    config_names = [c for c in args.configs.split(",") if c]
    unknown = (set(dtypes) - set(TRAINER.dtypes)) | (set(bug_names) - set(TRAINER.bugs)) | (
        set(config_names) - set(TRAINER.configs))
    if unknown:
        ap.error(f"unknown dtypes, bugs or configurations: {sorted(unknown)}")

    # torch's optimizers import torch._dynamo on first use: 3 to 4 s of CPU in every forked
    # rank of every run unless the parent has imported it once for all of them
    import torch._dynamo  # noqa: F401

    work = args.work or tempfile.mkdtemp(prefix="ttrace-detect-")
    os.makedirs(work, exist_ok=True)
    start = time.time()
    select = ci_cases if args.subset == "ci" else cases
    # One list of cases per way, the same runs in the same order (only the reference differs).
    checked = {laid_out: select(dtypes, bug_names, config_names,
                                TRAINER.reference_layouts if laid_out else {})
               for laid_out in ways}
    runs = list(zip(*checked.values()))
    if len({len(way) for way in checked.values()}) != 1 or not all(
            case.same_run(run[0]) for run in runs for case in run):
        raise RuntimeError("the ways of checking select different runs")
    everything = [case for way in checked.values() for case in way]
    used = [d for d in dtypes if any(c.dtype == d for c in everything)]
    run_all([task for d in used for task in references(
        work, d, sorted({c.reference for c in everything if c.dtype == d and c.reference}))],
        args.jobs)
    run_all([train_and_check(run, work, os.path.abspath(args.check)) for run in runs],
            args.jobs)
    seconds = time.time() - start
    if args.table:
        for laid_out, way in checked.items():
            section = TRAINER.name + ("_laid_out_references" if laid_out else "")
            write_section(args.table, section,
                          table(way, seconds, args.subset, laid_out, shared=len(ways) > 1))
    failed = [c for c in everything if c.failures]
    for c in failed:
        print(f"FAIL {c.name}: {'; '.join(c.failures)} (traces and logs in {work})")
    print(f"{len(runs)} runs, {len(everything)} checks, {len(failed)} failed, {seconds:.0f} s")
    if args.work is None and not failed:
        shutil.rmtree(work)  # kept when something failed, to look at
    return 1 if failed else 0

