#!/usr/bin/env python3
"""The bundled sample traces (resources/samples): which runs of the GPT trainer they are, and
what ttrace-check must say about each.

    samples.py OUT    (scripts/make_samples.sh: OUT = resources/samples)

writes OUT/<sample>/{dist,ref,pert} for every sample of SAMPLES, all in bf16, one iteration of
two micro-batches (small and quick to check), and OUT/samples.json: per sample its bug, layout
and what the checker must name, the root cause and ranks taken from the bug corpus (bugs.py).
The tests of the checker and the GUI read it instead of repeating the corpus.

The references do not depend on the layout or the bug (they are the bug-free single-device
model), so only `clean` holds them; the other samples' ref and pert are relative symbolic
links to clean's, which keeps the samples a few MB. Every run is seeded: regenerating gives the
same bytes.
"""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this trainer, and examples/ (corpus.py)
from bugs import BUGS, CONFIGS, PARAMETER_GRADIENTS  # noqa: E402

DTYPE, ITERATIONS = "bf16", 1
REFERENCES = "clean"  # the sample holding the reference and the perturbed reference


@dataclass(frozen=True)
class Sample:
    name: str
    config: str  # a layout of bugs.CONFIGS
    bug: str = None  # a bug of bugs.BUGS; None: a clean run
    # The tensor the checker must name first (its TensorKey text), from where the bug acts: the
    # corpus says which module, this says which of its tensors comes first in execution order.
    first_faulty: str = None
    shows: str = ""


SAMPLES = [
    Sample("clean", "pp2_tp2_sp",
           shows="no bug: two pipeline stages of tensor and sequence parallelism (4 ranks) agree "
                 "with the reference within bf16 round-off"),
    Sample("row_bias_every_rank", "tp2", "row_bias_every_rank",
           "layers.0.attn.proj forward_output[0] it0 mb0",
           "tensor parallelism: the first row-parallel linear's output carries its bias twice, "
           "and everything after it cascades"),
    Sample("sp_norm_grad_no_allreduce", "pp2_tp2_sp", "sp_norm_grad_no_allreduce",
           "layers.0.norm1.weight param_grad it0",
           "sequence parallelism: the activations are right but the TP replicas of the "
           "layer-norm weight gradients disagree (each holds its sequence chunk's part)"),
    Sample("moe_expert_offset", "dp2", "moe_expert_offset",
           "layers.1.mlp forward_output[0] it0 mb0",
           "expert parallelism over the data-parallel ranks: tokens sent to the second rank run "
           "through the wrong local expert"),
    Sample("pp_stale_activation", "pp2", "pp_stale_activation",
           "layers.1 forward_input[0] it0 mb1",
           "pipeline parallelism: the first stage sends micro-batch 0's activation again for "
           "micro-batch 1; only the second stage's rank receives it"),
]


def expectations(sample):
    """What ttrace-check must say about `sample`, the root cause and ranks from the corpus."""
    config = CONFIGS[sample.config]
    bug = BUGS.get(sample.bug)
    if bug is not None and sample.config not in bug.configs:
        raise ValueError(f"{sample.name}: {sample.bug} does not show in {sample.config}")
    if bug is not None and bug.root_cause == PARAMETER_GRADIENTS:
        # the tests compare the root cause with a module name
        raise ValueError(f"{sample.name}: {sample.bug} has no root-cause module")
    return {
        "name": sample.name,
        "config": sample.config,
        "args": config.args(),
        "world_size": config.world,
        "dtype": DTYPE,
        "bug": sample.bug,
        "shows": sample.shows,
        "exit_code": 0 if bug is None else 1,
        "first_faulty": sample.first_faulty,
        "root_cause": bug.root_cause if bug else None,
        "faulty_ranks": bug.expected_ranks(config) if bug else None,
    }


def train_command(out, *args):
    """The train.py command line of a sample's run into `out`."""
    return [sys.executable, os.path.join(HERE, "train.py"), "--out", out, "--dtype", DTYPE,
            "--iterations", str(ITERATIONS), *args]


def dist_args(sample):
    return ["--config", sample.config] + (["--bug", sample.bug] if sample.bug else [])


def train(out, *args):
    subprocess.run(train_command(out, *args), check=True, stdout=subprocess.DEVNULL)
    print(out, flush=True)


def main(out):
    for sample in SAMPLES:
        # the writer adds to a folder: no rank file of an earlier, larger run may survive
        shutil.rmtree(os.path.join(out, sample.name), ignore_errors=True)
    train(os.path.join(out, REFERENCES, "ref"), "--role", "reference")
    train(os.path.join(out, REFERENCES, "pert"), "--role", "perturbed-reference")
    for sample in SAMPLES:
        folder = os.path.join(out, sample.name)
        train(os.path.join(folder, "dist"), *dist_args(sample))
        if sample.name != REFERENCES:
            for role in ("ref", "pert"):
                os.symlink(os.path.join("..", REFERENCES, role), os.path.join(folder, role))
    with open(os.path.join(out, "samples.json"), "w") as f:
        json.dump({"generated_by": "scripts/make_samples.sh (examples/gpt/samples.py)",
                   "iterations": ITERATIONS,
                   "samples": [expectations(s) for s in SAMPLES]}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT")
    main(sys.argv[1])
