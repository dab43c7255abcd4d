"""What a trainer's bug corpus says about each bug (examples/gpt/bugs.py,
examples/torch_native/bugs.py): what it does, what real mistake it is modelled on, the layouts
and recipes it shows in, and what ttrace must name. examples/detection.py checks the checker's
answers against it; `train.py --list-bugs` prints it. `run_arguments` is the command line both
trainers share, the one detection.py drives."""

import os
import tempfile
from dataclasses import dataclass, field

PARAMETER_GRADIENTS = "(a parameter gradient)"  # root cause: any parameter gradient


@dataclass(frozen=True)
class Bug:
    name: str
    description: str
    modelled_on: str
    configs: tuple  # names in the trainer's CONFIGS
    # the module ttrace must name, a tuple of modules (the bug is in each), or
    # PARAMETER_GRADIENTS
    root_cause: object
    faulty_ranks: object = None  # Config -> ranks the faulty shard must lie in; None: all ranks
    # recipes it shows in and is tested in (the GPT trainer's fp8_rowwise only where named:
    # its clean runs show that the recipe raises no alarm, its own bug that it is checked)
    dtypes: tuple = ("fp32", "bf16", "fp8")
    known_miss: str = ""  # why ttrace cannot see it, for a bug kept to show a limit
    # recipe -> why ttrace finds the bug but names another root cause there (a limit shown);
    # "RECIPE vs LAYOUT": only against a reference laid out so (detection.py --references)
    mislocalized: dict = field(default_factory=dict)
    # for a bug that enters through a gradient: where the root cause's faulty output gradient
    # must be said to come from, the module whose backward handed it over or "loss"
    gradient_from: str = ""

    def expected_ranks(self, config):
        return None if self.faulty_ranks is None else self.faulty_ranks(config)


def run_arguments(ap, bugs, dtypes):
    """Adds to argparse parser `ap` the options every trainer takes: --role, --out, --dtype,
    --bug, --iterations, --seed, --sample-order and --list-bugs."""
    ap.add_argument("--role", default="distributed",
                    choices=["distributed", "reference", "perturbed-reference"])
    ap.add_argument("--out", help="trace folder to write")
    ap.add_argument("--dtype", default="fp32", choices=sorted(dtypes))
    # (argparse formats help with %: a description's own, "10%", would break --help)
    ap.add_argument("--bug", choices=sorted(bugs), metavar="NAME",
                    help="inject a silent bug:\n" + "\n".join(
                        f"  {b.name}: {b.description}".replace("%", "%%")
                        for b in bugs.values()))
    ap.add_argument("--iterations", type=int, default=2, help="iterations to train and capture")
    ap.add_argument("--seed", type=int, default=1, help="seed of the perturbation")
    ap.add_argument("--sample-order", choices=["kept", "reversed"], default="reversed",
                    help="perturbed reference: process each micro-batch's sequences in the "
                         "reference's order or reversed, so that its reductions over them "
                         "(parameter gradients, the loss) round in another order too "
                         "(docs/thresholds.md)")
    ap.add_argument("--list-bugs", action="store_true", help="print the bug corpus as JSON")


def sample_order(args, samples):
    """The order this run processes each micro-batch's `samples` in, as the reference's
    indices: reversed in a perturbed reference with --sample-order reversed, so that its sums
    over them round in another order (docs/thresholds.md); None: the reference's order."""
    if args.role == "perturbed-reference" and args.sample_order == "reversed":
        return list(reversed(range(samples)))
    return None


def table(bugs, configs):
    """The corpus as JSON-ready data: per bug its description, recipes, configurations and
    expected localization."""
    return [{"bug": b.name, "description": b.description, "modelled_on": b.modelled_on,
             "dtypes": list(b.dtypes), "known_miss": b.known_miss or None,
             "mislocalized": b.mislocalized or None, "gradient_from": b.gradient_from or None,
             "configs": {c: {"args": ["--config", c], "root_cause": b.root_cause,
                             "faulty_ranks": b.expected_ranks(configs[c])}
                         for c in b.configs}}
            for b in bugs.values()]


def start_ranks(train, args, world, *more):
    """Runs train(rank, args, *more, rendezvous_file) in `world` forked processes: they inherit
    the imported torch instead of importing it again, and torch._dynamo, which torch's
    optimizers import on first use (3 to 4 s of CPU in every rank otherwise)."""
    import torch._dynamo  # noqa: F401
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(train, args=(args, *more, os.path.join(tmp, "rdzv")), nprocs=world,
                           start_method="fork")
