#!/usr/bin/env python3
"""Writes the fuzzers' seed inputs to OUT/<fuzzer>/ from the bundled samples and the test
fixtures: real manifests, small rank files (and the damaged ones that crash libhdf5), records
of a real outcome journal, a real index cache, and names for the report writers. Uses
$TTRACE_SOURCE_DIR, $TTRACE_FIXTURES and $TTRACE_CHECK (the CTest environment).
Usage: make_seeds.py OUT"""
import glob
import os
import shutil
import struct
import subprocess
import sys
import tempfile

JOURNAL_MAGIC = b"ttrace outcome journal 1\n"


def fresh(out, name):
    folder = os.path.join(out, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


def copy_numbered(paths, folder):
    for i, path in enumerate(sorted(paths)):
        shutil.copy(path, os.path.join(folder, f"{i:03d}-{os.path.basename(path)}"))


def journal_records(path):
    """The payloads of a journal file: [u32 length][u32 crc][payload] after its header."""
    data = open(path, "rb").read()
    if not data.startswith(JOURNAL_MAGIC):
        return []
    at = len(JOURNAL_MAGIC)
    (id_length,) = struct.unpack_from("<I", data, at)
    at += 4 + id_length
    records = []
    while at + 8 <= len(data):
        (length,) = struct.unpack_from("<I", data, at)
        payload = data[at + 8:at + 8 + length]
        if len(payload) != length:
            break
        records.append(payload)
        at += 8 + length
    return records


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    out = argv[1]
    source = os.environ["TTRACE_SOURCE_DIR"]
    fixtures = os.environ["TTRACE_FIXTURES"]
    check = os.environ["TTRACE_CHECK"]
    samples = os.path.join(source, "resources", "samples")
    clean = os.path.join(samples, "clean")

    copy_numbered(glob.glob(os.path.join(samples, "*", "*", "manifest.json")) +
                  glob.glob(os.path.join(fixtures, "*", "*", "manifest.json")),
                  fresh(out, "manifest"))

    # Small rank files of every layout, and every rank file found to crash or hang libhdf5.
    rank_files = []
    for case in ("tp_column", "tp_strided", "cp_zigzag", "ep", "combined"):
        rank_files += glob.glob(os.path.join(fixtures, case, "dist", "rank0000[01].h5"))
    for crasher in glob.glob(os.path.join(fixtures, "bad", "hdf5_*")):
        for path in glob.glob(os.path.join(crasher, "rank*.h5")):
            if open(path, "rb").read() != open(os.path.join(clean, "dist", os.path.basename(path)), "rb").read():
                rank_files.append(path)
    copy_numbered(rank_files, fresh(out, "rank_file"))

    with tempfile.TemporaryDirectory() as cache:
        # A check that kills itself after two tensors leaves its journal; a whole check of a
        # small case leaves its index cache.
        env = dict(os.environ, TTRACE_TEST_KILL_PROCESS="0")
        subprocess.run([check, "--quiet", "--cache-dir", cache, os.path.join(clean, "dist"),
                        os.path.join(clean, "ref"), "--perturbed", os.path.join(clean, "pert")],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        folder = fresh(out, "journal")
        journals = glob.glob(os.path.join(cache, "unfinished", "*", "*"))
        records = [r for j in journals for r in journal_records(j)]
        if not records:
            sys.exit(f"make_seeds.py: the killed check left no journal records in {cache}")
        for i, record in enumerate(records):
            open(os.path.join(folder, f"record-{i:03d}"), "wb").write(record)

    with tempfile.TemporaryDirectory() as cache:
        case = os.path.join(fixtures, "tp_column")
        subprocess.run([check, "--quiet", "--cache-dir", cache, os.path.join(case, "dist"),
                        os.path.join(case, "ref")], stdout=subprocess.DEVNULL, check=True)
        shutil.copy(os.path.join(cache, "index.sqlite"), os.path.join(fresh(out, "index_cache"), "index.sqlite"))

    folder = fresh(out, "reports")
    names = [b"layers.0.attn.qkv", b"<script>alert(1)</script>", b"a|b\nc|d", b"&amp; &#0; &",
             b"%1 %2 %n", b"\xff\xfe broken utf-8", b"```\n# heading", b"\x00nul"]
    for i, name in enumerate(names):
        open(os.path.join(folder, f"names-{i:03d}"), "wb").write(b"\x01" + name * 4)


if __name__ == "__main__":
    main(sys.argv)
