#!/usr/bin/env python3
"""ttrace-check under mpirun gives what one process gives.

test_mpi_check.py CHECKER MPIEXEC: on a bundled sample (a real PyTorch run) and on a generated
synthetic TP x PP x DP set, runs the checker alone, then with `mpirun -np 2` and `-np 4`, and
compares the JSON reports (all but the creation time and the seconds taken), the results
stores (every stored value) and the exit codes, and checks that the index cache the processes
built together covers every rank file. Then makes process 1 fail after its first
tensor (test hook TTRACE_TEST_FAIL_PROCESS) and checks that exit code 3 says so, that the
report lists exactly the tensors left unchecked, and that every other tensor's result is the
single-process one. Exits 77 (skipped) when the checker was built without MPI."""

import json
import os
import sqlite3
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPED = 77
# The stored tables and the columns that differ between two runs of the same check.
TABLES = {"runs": ("id", "created"), "tensors": ("run_id",), "tensor_rank_seq": ("run_id",),
          "shards": ("run_id",), "replica_mismatches": ("run_id",), "diagnostics": ("run_id",)}


def run_check(checker, mpiexec, processes, traces, work, name, env=None):
    """Runs one check with its own cache; returns (exit code, JSON report, results store)."""
    cache = os.path.join(work, name + "-cache")
    report = os.path.join(work, name + ".json")
    command = [checker, f"{traces}/dist", f"{traces}/ref", "--perturbed", f"{traces}/pert",
               "--cache-dir", cache, "--json", report, "--quiet", "--threads", "1"]
    if processes:
        # CI runs as root on 2 cores: allow both; -x passes the test hook to every process.
        command = [mpiexec, "--oversubscribe", "--bind-to", "none", "-np", str(processes),
                   "-x", "TTRACE_TEST_FAIL_PROCESS"] + command
    full_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                    TTRACE_TEST_FAIL_PROCESS="")
    full_env.update(env or {})
    done = subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=300)
    if not os.path.exists(report):
        sys.exit(f"{name}: no report written (exit code {done.returncode})\n{done.stderr}")
    with open(report) as f:
        return done.returncode, json.load(f), stored_rows(os.path.join(cache, "results.sqlite"))


def stored_rows(path):
    db = sqlite3.connect(path)
    rows = {}
    for table, skipped in TABLES.items():
        columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})") if c[1] not in skipped]
        rows[table] = sorted(map(repr, db.execute(f"SELECT {', '.join(columns)} FROM {table}")))
    db.close()
    return rows


def indexed_files(cache):
    """The rank files the index cache holds an entry for."""
    db = sqlite3.connect(os.path.join(cache, "index.sqlite"))
    files = {row[0] for row in db.execute("SELECT path FROM files")}
    db.close()
    return files


def rank_files(traces):
    return {os.path.join(traces, role, f) for role in ("dist", "ref", "pert")
            for f in os.listdir(os.path.join(traces, role)) if f.endswith(".h5")}


def comparable(report):
    report = dict(report, created=None)
    report["comparison"] = dict(report["comparison"], seconds=None)
    return report


def key_text(key):
    """TensorKey::toString(): how a diagnostic names its tensor."""
    if key["micro_batch"] < 0:  # parameter kinds: no index, no micro-batch
        return f"{key['name']} {key['kind']} it{key['iteration']}"
    return f"{key['name']} {key['kind']}[{key['index']}] it{key['iteration']} mb{key['micro_batch']}"


def check_same(checker, mpiexec, traces, work, label):
    code, report, stored = run_check(checker, mpiexec, 0, traces, work, label + "-1")
    assert report["tensors"], f"{label}: nothing compared"
    for processes in (2, 4):
        name = f"{label}-{processes}"
        code_n, report_n, stored_n = run_check(checker, mpiexec, processes, traces, work, name)
        assert code_n == code, f"{name}: exit code {code_n}, one process gave {code}"
        assert comparable(report_n) == comparable(report), f"{name}: the JSON report differs"
        for table in TABLES:
            assert stored_n[table] == stored[table], f"{name}: stored {table} differ"
        # The processes index a share of the rank files each, into one shared cache.
        missing = rank_files(os.path.realpath(traces)) - indexed_files(
            os.path.join(work, name + "-cache"))
        assert not missing, f"{name}: the index cache lacks {sorted(missing)[:3]}"
        print(f"ok: {name} equals one process (exit code {code}, "
              f"{len(report['tensors'])} tensors)")
    return report


def check_failure(checker, mpiexec, traces, work, single):
    code, report, stored = run_check(checker, mpiexec, 2, traces, work, "fail",
                                     {"TTRACE_TEST_FAIL_PROCESS": "1"})
    assert code == 3, f"a failed process must give exit code 3 (incomplete), got {code}"
    unchecked = {d["tensor"] for d in report["diagnostics"]
                 if d["severity"] == "error" and d["message"].startswith("not checked: process 1")}
    # "result" is a tensor's position in the report, which shifts when others are missing.
    checked = {key_text(t["key"]): dict(t, result=None) for t in report["tensors"]}
    everything = {key_text(t["key"]): dict(t, result=None) for t in single["tensors"]}
    assert unchecked, "the report lists no unchecked tensor"
    assert not unchecked & checked.keys(), "a tensor is both checked and unchecked"
    assert unchecked | checked.keys() == everything.keys(), "tensors were lost"
    for key, tensor in checked.items():
        assert tensor == everything[key], f"{key}: result differs from one process's"
    assert [r for r in stored["runs"]] and all(", 1)" in r for r in stored["runs"]), \
        "the incomplete run must be stored as incomplete"
    print(f"ok: process 1 failed: {len(unchecked)} tensors listed unchecked, "
          f"{len(checked)} kept, none lost")


def main():
    checker, mpiexec = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    if not mpiexec:
        print("skipped: ttrace-check was built without MPI "
              "(apt install libopenmpi-dev openmpi-bin, then reconfigure)")
        return SKIPPED
    with tempfile.TemporaryDirectory() as work:
        sample = os.path.join(ROOT, "resources", "samples", "row_bias_every_rank")
        single = check_same(checker, mpiexec, sample, work, "sample")
        synthetic = os.path.join(work, "synthetic")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_synthetic_traces.py"),
                        synthetic, "--tp", "2", "--pp", "2", "--dp", "4",
                        "--tensors-per-rank", "8", "--bug", "2"], check=True)
        check_same(checker, mpiexec, synthetic, work, "synthetic")
        check_failure(checker, mpiexec, sample, work, single)
    return 0


if __name__ == "__main__":
    sys.exit(main())
