#!/usr/bin/env python3
"""What the ttrace capture costs a compiled training run: torchtitan's Llama-3 with its
per-block torch.compile (examples/torchtitan, configuration fsdp2_compile: inductor,
fullgraph=True, FSDP2 over 2 ranks) trained with and without the capture, in rounds, on the
same machine in this one script. The capture runs the captured iterations eagerly
(docs/capture.md, torch.compile), so it reports, per round's run:

- the first compiled iteration (dynamo and inductor compiling the blocks), with and without
  the capture: with it, the compilation happens after the captured iterations;
- the captured iterations' step time (eager, recording) over the compiled step time;
- the compiled iterations after them, with the capture against without it: what the capture
  costs the iterations it does not record (its model hooks stay installed).

    .venv/bin/python bench/compile_cost.py [--rounds 3] [--steps 8] [--layers 4]

Prints a Markdown table; docs/performance.md ("Capture cost of a compiled model") has its
figures."""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TRAIN = os.path.join(ROOT, "examples", "torchtitan", "train.py")
CAPTURED = 2  # the trainer's default --iterations


def run(work, steps, layers, capture):
    """One training run; returns the slowest rank's step times."""
    prefix = os.path.join(work, "timings")
    for old in glob.glob(prefix + ".*"):
        os.remove(old)
    argv = [sys.executable, TRAIN, "--config", "fsdp2_compile", "--steps", str(steps),
            "--layers", str(layers), "--timings", prefix]
    argv += ["--out", os.path.join(work, "trace")] if capture else ["--no-capture"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ranks = []
    for path in sorted(glob.glob(prefix + ".rank*.json")):
        with open(path) as f:
            ranks.append(json.load(f)["step_seconds"])
    return [max(step) for step in zip(*ranks)]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    if args.steps < CAPTURED + 3:
        ap.error(f"--steps must leave at least 3 compiled iterations after the {CAPTURED} "
                 "captured ones")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.rounds):
            bare = run(work, args.steps, args.layers, capture=False)
            captured = run(work, args.steps, args.layers, capture=True)
            # without the capture the first iteration compiles; with it, the first one after
            # the captured iterations does
            compiled_bare = statistics.median(bare[CAPTURED + 1:])
            compiled_captured = statistics.median(captured[CAPTURED + 1:])
            rows.append({"compile_bare": bare[0], "compile_captured": captured[CAPTURED],
                         "compiled_bare": compiled_bare,
                         "captured_over_compiled": statistics.median(captured[1:CAPTURED])
                         / compiled_bare,
                         "first_captured": captured[0],
                         "after_ratio": compiled_captured / compiled_bare})

    def med(key):
        return statistics.median(r[key] for r in rows)

    print(f"torchtitan Llama-3 debugmodel, {args.layers} blocks, fsdp2_compile (2 ranks), "
          f"{args.steps} steps, {args.rounds} rounds (medians)\n")
    print("| compiling iteration, without / with capture (s) | compiled step (s) | "
          "first captured step (s) | captured step / compiled step | "
          "compiled step after capture / without |")
    print("|---|---|---|---|---|")
    print(f"| {med('compile_bare'):.2f} / {med('compile_captured'):.2f} | "
          f"{med('compiled_bare'):.3f} | {med('first_captured'):.2f} | "
          f"{med('captured_over_compiled'):.2f} | {med('after_ratio'):.3f} |")


if __name__ == "__main__":
    main()
