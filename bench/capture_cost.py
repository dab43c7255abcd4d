#!/usr/bin/env python3
"""What the ttrace capture costs a training step: the torch-native trainer
(examples/torch_native) run with and without the capture, alternating, in rounds, on the same
machine in this one script. Reports per layout the median step time of each, their ratio
(median of the rounds' ratios), the bytes each rank writes per step, the writer's throughput
per rank in MB/s (bytes over the writer thread's busy time), the seconds per step the training
thread spent on device-to-host copies (on a GPU: starting them) and waiting for room in the
write queue, the writer's wait for copies still in flight, and the queue's peak.

    .venv/bin/python bench/capture_cost.py [--rounds 3] [--configs fsdp2_tp2_sp,pp2] [sizes]
    python3 bench/capture_cost.py --device cuda --configs one-device [sizes]

`one-device` is the trainer's single-device run, the only one that trains on a GPU
(`--device cuda`, scripts/gpu-check.sh); there the page-locked device-to-host bandwidth is
measured alongside, the ceiling of what the capture can move.

The first iteration of every run warms up (allocations, the pipeline's shape inference) and is
left out. Prints a Markdown table; docs/performance.md ("Capture cost") has its figures."""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TRAIN = os.path.join(ROOT, "examples", "torch_native", "train.py")


def run(config, sizes, iterations, capture, work, bound_mb, device):
    """One training run; returns the rank files' timings."""
    out = os.path.join(work, "trace")
    prefix = os.path.join(work, "timings")
    for old in glob.glob(prefix + ".*"):
        os.remove(old)
    layout = ["--role", "reference"] if config == "one-device" else ["--config", config]
    argv = [sys.executable, TRAIN, *layout, "--iterations", str(iterations), "--device", device,
            "--timings", prefix, "--dtype", "bf16", "--max-queued-mb", str(bound_mb)] + sizes
    argv += ["--out", out] if capture else ["--no-capture"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ranks = []
    for path in sorted(glob.glob(prefix + ".rank*.json")):
        with open(path) as f:
            ranks.append(json.load(f))
    return ranks


def step_seconds(ranks):
    """The slowest rank's mean step time after the first (warm-up) iteration."""
    return max(statistics.mean(r["step_seconds"][1:]) for r in ranks)


def pinned_copy_gbps(device, megabytes=256, repeats=5):
    """Device-to-host bandwidth into page-locked memory, GB/s: the best of `repeats` copies of
    `megabytes`, timed by CUDA events."""
    import torch

    source = torch.empty(megabytes << 20, dtype=torch.uint8, device=device)
    host = torch.empty(source.shape, dtype=torch.uint8, pin_memory=True)
    best = float("inf")
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        host.copy_(source, non_blocking=True)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return source.numel() / best / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--device", default="cpu",
                    help="cuda: the one-device run trains on the GPU (default cpu)")
    ap.add_argument("--configs", default="fsdp2_tp2_sp,pp2,fsdp2_tp2_sp@16",
                    help="layouts of examples/torch_native/bugs.py; LAYOUT@MB bounds the "
                         "capture's write queue at MB MiB (default 1024)")
    ap.add_argument("sizes", nargs="*", default=["--dim", "512", "--heads", "8",
                                                 "--kv-heads", "4", "--ffn", "1408",
                                                 "--layers", "4", "--vocab", "8192",
                                                 "--seq", "256", "--batch", "8"],
                    help="train.py size options (default: dim 512, 4 layers, sequences of 256)")
    args = ap.parse_args()
    print(f"sizes: {' '.join(args.sizes)}; bf16; {args.iterations} iterations per run, the "
          f"first left out; {args.rounds} rounds; {os.cpu_count()} cores; device "
          f"{args.device}")
    if args.device.startswith("cuda"):
        import torch

        print(f"GPU: {torch.cuda.get_device_name(args.device)}; page-locked device-to-host "
              f"copy: {pinned_copy_gbps(args.device):.1f} GB/s")
    print()
    print("| layout | ranks | step without capture (s) | step with capture (s) | ratio "
          "(median of rounds) | MB written per rank per step | writer MB/s per rank | "
          "copies s/step | waiting at the bound s/step | writer waiting for copies s/step | "
          "queue peak MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for entry in args.configs.split(","):
            config, _, bound = entry.partition("@")
            bound_mb = int(bound or 1024)
            without, with_capture, ratios, stats = [], [], [], []
            for _ in range(args.rounds):
                base = step_seconds(run(config, args.sizes, args.iterations, False, work,
                                        bound_mb, args.device))
                ranks = run(config, args.sizes, args.iterations, True, work, bound_mb,
                            args.device)
                captured = step_seconds(ranks)
                without.append(base)
                with_capture.append(captured)
                ratios.append(captured / base)
                stats.append([r["capture"] for r in ranks])
            last = stats[-1]
            steps = args.iterations
            mb = statistics.mean(s["bytes"] for s in last) / 1e6
            writer = statistics.mean(s["bytes"] / s["seconds_writing"] for s in last) / 1e6
            copies = statistics.mean(s["seconds_copying"] for s in last) / steps
            waiting = statistics.mean(s["seconds_waiting_for_room"] for s in last) / steps
            in_flight = statistics.mean(s["seconds_waiting_for_copies"] for s in last) / steps
            peak = max(s["peak_queued_bytes"] for s in last) / 1e6
            print(f"| {config}, queue bound {bound_mb} MiB | {len(last)} | {statistics.median(without):.3f} | "
                  f"{statistics.median(with_capture):.3f} | {statistics.median(ratios):.2f} | "
                  f"{mb / steps:.1f} | {writer:.0f} | {copies:.3f} | {waiting:.3f} | "
                  f"{in_flight:.3f} | {peak:.1f} |")


if __name__ == "__main__":
    main()
