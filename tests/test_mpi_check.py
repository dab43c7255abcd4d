#!/usr/bin/env python3
"""ttrace-check under mpirun gives what one process gives.

test_mpi_check.py CHECKER MPIEXEC: on a bundled sample (a real PyTorch run), on a generated
synthetic TP x PP x DP set and on the same set against a reference laid out like it (a trusted
commit, its replicas and shards assembled by every process), runs the checker alone, then with
`mpirun -np 2` and `-np 4`, and
compares the JSON reports (all but the creation time and the seconds taken), the results
stores (every stored value) and the exit codes, and checks that the index cache the processes
built together covers every rank file. Then makes process 1 fail after its first
tensor (test hook TTRACE_TEST_FAIL_PROCESS) and checks that exit code 3 says so, that the
report lists exactly the tensors left unchecked, and that every other tensor's result is the
single-process one. Then makes process 1 kill itself (SIGKILL, test hook
TTRACE_TEST_KILL_PROCESS) and checks that the job fails, that the same command with another
process count resumes from the persisted outcomes and gives the single-process report and
results, also when a persisted record was cut off. Exits 77 (skipped) when the checker was
built without MPI."""

import glob
import json
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import pty
import tempfile
import threading
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPED = 77
# The stored tables and the columns that differ between two runs of the same check.
TABLES = {"runs": ("id", "created"), "tensors": ("run_id",), "tensor_rank_seq": ("run_id",),
          "shards": ("run_id",), "replica_mismatches": ("run_id",), "diagnostics": ("run_id",)}


def start_check(checker, mpiexec, processes, traces, cache, report, env=None, terminal=False):
    """Runs one check; returns the finished process (exit code, stderr). With `terminal`,
    stdout is a terminal, as for a user who watches the progress bar under mpirun. With no
    `cache`, the check runs with --no-cache."""
    if os.path.exists(report):
        os.remove(report)
    command = [checker, f"{traces}/dist", f"{traces}/ref", "--perturbed", f"{traces}/pert",
               "--json", report, "--threads", "1"]
    command += ["--cache-dir", cache] if cache else ["--no-cache"]
    if not terminal:
        command.append("--quiet")
    if processes:
        # CI runs as root on 2 cores: allow both; -x passes the test hooks to every process.
        command = [mpiexec, "--oversubscribe", "--bind-to", "none", "-np", str(processes),
                   "-x", "TTRACE_TEST_FAIL_PROCESS", "-x", "TTRACE_TEST_KILL_PROCESS",
                   "-x", "TTRACE_TEST_UNREAD_JOURNALS"] + command
    full_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                    TTRACE_TEST_FAIL_PROCESS="", TTRACE_TEST_KILL_PROCESS="",
                    TTRACE_TEST_UNREAD_JOURNALS="")
    full_env.update(env or {})
    if not terminal:
        return subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=300)
    screen, stdout = pty.openpty()
    shown = []
    reader = threading.Thread(target=read_all, args=(screen, shown))
    reader.start()
    done = subprocess.run(command, env=full_env, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=300)
    os.close(stdout)
    reader.join()
    return done


def read_all(fd, into):
    """Drains a terminal until its other end is closed."""
    try:
        while chunk := os.read(fd, 4096):
            into.append(chunk)
    except OSError:  # EIO: every writer is gone
        pass
    os.close(fd)


def run_check(checker, mpiexec, processes, traces, work, name, env=None):
    """Runs one check with its own cache; returns (exit code, JSON report, results store)."""
    cache = os.path.join(work, name + "-cache")
    report = os.path.join(work, name + ".json")
    done = start_check(checker, mpiexec, processes, traces, cache, report, env)
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
    single = code, report, stored = run_check(checker, mpiexec, 0, traces, work, label + "-1")
    assert report["tensors"], f"{label}: nothing compared"
    for processes in (2, 4):
        name = f"{label}-{processes}"
        code_n, report_n, stored_n = run_check(checker, mpiexec, processes, traces, work, name)
        assert code_n == code, f"{name}: exit code {code_n}, one process gave {code}"
        assert comparable(report_n) == comparable(report), f"{name}: the JSON report differs"
        for table in TABLES:
            assert stored_n[table] == stored[table], f"{name}: stored {table} differ"
        # Every rank file ends up in the shared index cache, whichever process indexed it
        # (which process indexes which part is tested in test_trace_set).
        missing = rank_files(os.path.realpath(traces)) - indexed_files(
            os.path.join(work, name + "-cache"))
        assert not missing, f"{name}: the index cache lacks {sorted(missing)[:3]}"
        print(f"ok: {name} equals one process (exit code {code}, "
              f"{len(report['tensors'])} tensors)")
    return single


def laid_out_reference(work, make_synthetic):
    """The synthetic set with a reference laid out as its distributed run is (a trusted commit
    of the same TP x PP x DP layout, replicas included): the generator's run without the bug,
    relabelled as the reference."""
    traces = os.path.join(work, "laid-out")
    make_synthetic(traces)
    make_synthetic(os.path.join(work, "synthetic-clean"), bug=False)
    shutil.rmtree(os.path.join(traces, "ref"))
    shutil.move(os.path.join(work, "synthetic-clean", "dist"), os.path.join(traces, "ref"))
    manifest = os.path.join(traces, "ref", "manifest.json")
    with open(manifest) as f:
        fields = json.load(f)
    fields["role"] = "reference"
    with open(manifest, "w") as f:
        json.dump(fields, f)
    return traces


def check_stored_run(checker, mpiexec, traces, work, single):
    """A check whose results are stored indexes nothing, under mpirun too: with the index
    cache deleted, the same command on 2 processes reports the same and creates none."""
    cache = os.path.join(work, "sample-2-cache")  # check_same's run on 2 processes
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(os.path.join(cache, "index.sqlite" + suffix)):
            os.remove(os.path.join(cache, "index.sqlite" + suffix))
    report = os.path.join(work, "stored.json")
    done = start_check(checker, mpiexec, 2, traces, cache, report)
    assert done.returncode == single[0], f"stored: exit code {done.returncode}\n{done.stderr}"
    with open(report) as f:
        stored = json.load(f)
    assert stored["comparison"]["from_cache"], "stored: the results were not reused"
    stored["comparison"]["from_cache"] = single[1]["comparison"]["from_cache"]
    assert comparable(stored) == comparable(single[1]), "stored: the JSON report differs"
    assert not os.path.exists(os.path.join(cache, "index.sqlite")), \
        "stored: the traces were indexed although their results are stored"
    print("ok: a stored run is reported under mpirun without indexing the traces")


def check_results_by_message(checker, mpiexec, traces, work, single):
    """Rank 0 reads the other processes' results from their journals in the shared cache
    directory. Where it cannot (a cache directory local to each node: test hook
    TTRACE_TEST_UNREAD_JOURNALS) it asks for them by message, and without a cache they come
    by message at once: the report is the same either way."""
    code, report, stored = run_check(checker, mpiexec, 4, traces, work, "unread",
                                     {"TTRACE_TEST_UNREAD_JOURNALS": "1"})
    assert code == single[0], f"unread journals: exit code {code}, one process gave {single[0]}"
    assert comparable(report) == comparable(single[1]), "unread journals: the JSON report differs"
    for table in TABLES:
        assert stored[table] == single[2][table], f"unread journals: stored {table} differ"
    report_path = os.path.join(work, "no-cache.json")
    done = start_check(checker, mpiexec, 2, traces, None, report_path)
    assert done.returncode == single[0], f"no cache: exit code {done.returncode}\n{done.stderr}"
    with open(report_path) as f:
        assert comparable(json.load(f)) == comparable(single[1]), "no cache: the JSON report differs"
    print("ok: results asked for by message, and sent without a cache, give the same report")


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
    db = sqlite3.connect(os.path.join(work, "fail-cache", "results.sqlite"))
    cancelled = [c for (c,) in db.execute("SELECT cancelled FROM runs")]
    db.close()
    assert stored["runs"] and cancelled == [1], "the incomplete run must be stored as incomplete"
    print(f"ok: process 1 failed: {len(unchecked)} tensors listed unchecked, "
          f"{len(checked)} kept, none lost")


JOURNAL_MAGIC = b"ttrace outcome journal 1\n"


def journal_records(path):
    """(offset, length) of the intact records of an outcome journal file (docs/checker.md)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data.startswith(JOURNAL_MAGIC), f"{path}: not an outcome journal"
    at = len(JOURNAL_MAGIC)
    at += 4 + struct.unpack_from("<I", data, at)[0]  # the fingerprint
    records = []
    while at + 8 <= len(data):
        length, crc = struct.unpack_from("<II", data, at)
        payload = data[at + 8:at + 8 + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            break
        records.append((at, 8 + length))
        at += 8 + length
    return records


def journal_files(cache):
    return sorted(glob.glob(os.path.join(cache, "unfinished", "*", "*.outcomes")))


def kill_then_resume(checker, mpiexec, traces, work, single, name, killed_on, resumed_on,
                     tear):
    """Kills process 1 of a `killed_on`-process job, lets `tear(files)` damage the persisted
    records, re-runs the same command on `resumed_on` processes (0: without mpirun) and checks
    that it resumes with every intact record and ends as one uninterrupted process."""
    cache = os.path.join(work, name + "-cache")
    report = os.path.join(work, name + ".json")
    code, single_report, single_stored = single
    killed = start_check(checker, mpiexec, killed_on, traces, cache, report,
                         {"TTRACE_TEST_KILL_PROCESS": "1"})
    assert killed.returncode not in (0, 1, 2, 3), \
        f"{name}: a killed process must fail the job, got exit code {killed.returncode}"
    assert not os.path.exists(report), f"{name}: the killed job wrote a report"
    files = journal_files(cache)
    assert files, f"{name}: the killed job persisted nothing"
    tear(files)
    persisted = sum(len(journal_records(f)) for f in files)
    assert persisted >= 1, f"{name}: no intact record left"

    # Under mpirun, watched on a terminal: the progress bar shows the whole job, so it starts
    # from the tensors already compared, never from 0.
    resumed = start_check(checker, mpiexec, resumed_on, traces, cache, report,
                          terminal=resumed_on > 0)
    said = re.search(r"resuming: (\d+) of (\d+) tensors already compared in a previous run",
                     resumed.stderr)
    assert said, f"{name}: the re-run did not say it resumes:\n{resumed.stderr}"
    reused, total = int(said.group(1)), int(said.group(2))
    assert reused == persisted, f"{name}: reused {reused} tensors, {persisted} were intact"
    assert reused < total == len(single_report["tensors"]), f"{name}: {reused} of {total}"
    assert resumed.returncode == code, \
        f"{name}: exit code {resumed.returncode}, one process gave {code}\n{resumed.stderr}"
    with open(report) as f:
        assert comparable(json.load(f)) == comparable(single_report), \
            f"{name}: the JSON report differs from one uninterrupted process's"
    stored = stored_rows(os.path.join(cache, "results.sqlite"))
    for table in TABLES:
        assert stored[table] == single_stored[table], f"{name}: stored {table} differ"
    assert not journal_files(cache), f"{name}: the stored run left its journal behind"
    if resumed_on:
        shown = [int(p) for p in re.findall(r"comparing\s+\[[# ]*\]\s+(\d+)%", resumed.stderr)]
        assert shown, f"{name}: no progress bar under mpirun:\n{resumed.stderr!r}"
        assert shown == sorted(shown) and shown[-1] == 100 and shown[0] > 0, \
            f"{name}: the bar must go from the tensors reused up to 100%, showed {shown}"
        print(f"ok: {name}: the progress bar under mpirun went from {shown[0]}% to 100%")
    print(f"ok: {name}: killed on {killed_on} processes, resumed on {resumed_on or 1} with "
          f"{reused} of {total} tensors reused; equals one uninterrupted process")


def cut_last_record(files):
    """Cuts the last record of the fullest journal file in half, as a kill mid-write would."""
    path = max(files, key=lambda f: len(journal_records(f)))
    offset, length = journal_records(path)[-1]
    os.truncate(path, offset + length // 2)


def check_kill(checker, mpiexec, traces, work, single):
    kill_then_resume(checker, mpiexec, traces, work, single, "kill", 4, 2, lambda files: None)
    kill_then_resume(checker, mpiexec, traces, work, single, "torn", 2, 0, cut_last_record)


def main():
    checker, mpiexec = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    if not mpiexec:
        print("skipped: ttrace-check was built without MPI "
              "(apt install libopenmpi-dev openmpi-bin, then reconfigure)")
        return SKIPPED
    with tempfile.TemporaryDirectory() as work:
        sample = os.path.join(ROOT, "resources", "samples", "row_bias_every_rank")
        single = check_same(checker, mpiexec, sample, work, "sample")
        check_stored_run(checker, mpiexec, sample, work, single)
        check_results_by_message(checker, mpiexec, sample, work, single)

        def make_synthetic(out, bug=True):
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_synthetic_traces.py"),
                            out, "--tp", "2", "--pp", "2", "--dp", "4", "--tensors-per-rank", "8"]
                           + (["--bug", "2"] if bug else []), check=True)

        synthetic = os.path.join(work, "synthetic")
        make_synthetic(synthetic)
        check_same(checker, mpiexec, synthetic, work, "synthetic")
        # the reference's pieces assembled and its replicas compared by every process
        code, report, _ = check_same(checker, mpiexec, laid_out_reference(work, make_synthetic),
                                     work, "laid-out")
        assert code == 1 and report["runs"]["reference"]["world_size"] == 16, \
            f"laid-out: exit code {code}, reference {report['runs']['reference']}"
        check_failure(checker, mpiexec, sample, work, single[1])
        check_kill(checker, mpiexec, sample, work, single)
    return 0


if __name__ == "__main__":
    sys.exit(main())
