"""A full or read-only disk costs the cache, never the verdict (docs/checker.md, "Cache"): the
built ttrace-check is run on the bundled samples with its cache on a small tmpfs, mounted in a
mount namespace of its own (unshare), at every amount of free space from none to more than the
check writes, so that the disk fills while the index, the run lock, a journal or the results
are written. Each run must end with the verdict of a check without a cache, and say in one
warning that the results were not kept and why."""

import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLES = os.path.join(ROOT, "resources", "samples")
PAGE = 4096


def namespace_command():
    """How to mount a tmpfs here: as root in a mount namespace, else in a user namespace."""
    if shutil.which("unshare") is None:
        return None
    for command in (["unshare", "--mount"], ["unshare", "--user", "--map-root-user", "--mount"]):
        probe = subprocess.run(command + ["sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                               capture_output=True)
        if probe.returncode == 0:
            return command
    return None


class CacheDiskTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.checker = os.environ.get("TTRACE_CHECK")
        if not cls.checker:
            raise unittest.SkipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        cls.unshare = namespace_command()
        if cls.unshare is None:
            raise unittest.SkipTest("no mount namespace for a tmpfs (unshare) on this machine")

    def sample_args(self, name):
        folder = os.path.join(SAMPLES, name)
        return [os.path.join(folder, "dist"), os.path.join(folder, "ref"),
                "--perturbed", os.path.join(folder, "pert")]

    def on_tmpfs(self, size, script_args, read_only_after_first=False):
        """Runs the check twice with its cache on a tmpfs of `size` bytes (the second run meets
        what the first left), or once more after remounting it read-only."""
        with tempfile.TemporaryDirectory() as tmp:
            mount = os.path.join(tmp, "disk")
            os.mkdir(mount)
            outputs = os.path.join(tmp, "out")
            os.mkdir(outputs)
            # Each run's output in its own file, outside the tmpfs.
            script = (
                'mount -t tmpfs -o size="$1" tmpfs "$2" || exit 90\n'
                'disk="$2"; out="$3"; shift 3\n'
                '"$@" --cache-dir "$disk/cache" > "$out/1" 2>&1; echo $? > "$out/1.rc"\n'
                + ('mount -o remount,ro "$disk" || exit 91\n' if read_only_after_first else "")
                + '"$@" --cache-dir "$disk/cache" > "$out/2" 2>&1; echo $? > "$out/2.rc"\n')
            done = subprocess.run(self.unshare + ["sh", "-c", script, "sh", str(size), mount,
                                                  outputs, self.checker] + script_args,
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            runs = []
            for run in ("1", "2"):
                with open(os.path.join(outputs, run)) as f, \
                        open(os.path.join(outputs, run + ".rc")) as rc:
                    runs.append((int(rc.read()), f.read()))
            return runs

    def assert_verdict_kept(self, runs, expected_code, verdict, cause):
        for code, output in runs:
            self.assertEqual(code, expected_code, output)
            self.assertIn(verdict, output)
            self.assertNotIn("Unknown error", output)
            self.assertNotIn("not checked", output)
            cache_warnings = [line for line in output.splitlines()
                              if re.match(r"warning: .*/disk/cache: ", line)]
            self.assertLessEqual(len(cache_warnings), 1, output)
            for line in cache_warnings:
                self.assertIn("the cache cannot be written: " + cause, line)
                self.assertRegex(line, "the results of this check (are not kept|are kept all)")

    def test_clean_check_on_a_filling_disk(self):
        # From one page to more than a check of this sample writes (about 1 MiB).
        for pages in list(range(1, 64, 9)) + list(range(64, 400, 24)):
            with self.subTest(free_kib=pages * PAGE // 1024):
                runs = self.on_tmpfs(pages * PAGE, self.sample_args("clean"))
                self.assert_verdict_kept(runs, 0, "no bug: 356 of 356 reference tensors compared",
                                         "the disk holding it is full")

    def test_bug_found_on_a_filling_disk(self):
        for pages in (2, 40, 120, 200, 280):
            with self.subTest(free_kib=pages * PAGE // 1024):
                runs = self.on_tmpfs(pages * PAGE, self.sample_args("row_bias_every_rank"))
                self.assert_verdict_kept(runs, 1, "BUG FOUND", "the disk holding it is full")

    def test_read_only_cache(self):
        runs = self.on_tmpfs(64 << 20, self.sample_args("clean"), read_only_after_first=True)
        self.assertEqual(runs[0][0], 0, runs[0][1])
        self.assertNotIn("warning", runs[0][1])
        self.assert_verdict_kept(runs[1:], 0, "no bug: 356 of 356 reference tensors compared",
                                 "it is on a read-only file system")
        self.assertIn("it is on a read-only file system", runs[1][1])


class UnfinishedJournalTest(unittest.TestCase):
    """A check killed between storing its results and removing its journals leaves them in
    `unfinished/`: the next check that finds the results stored removes them."""

    def test_left_journals_are_removed(self):
        checker = os.environ.get("TTRACE_CHECK")
        if not checker:
            self.skipTest("TTRACE_CHECK (the built ttrace-check) is not set")
        folder = os.path.join(SAMPLES, "clean")
        args = [checker, os.path.join(folder, "dist"), os.path.join(folder, "ref"),
                "--perturbed", os.path.join(folder, "pert"), "--quiet"]
        with tempfile.TemporaryDirectory() as cache:
            first = subprocess.run(args + ["--cache-dir", cache], capture_output=True, text=True)
            self.assertEqual(first.returncode, 0, first.stdout + first.stderr)
            with sqlite3.connect(os.path.join(cache, "results.sqlite")) as db:
                ((fingerprint,),) = db.execute("SELECT fingerprint FROM runs").fetchall()
            left = os.path.join(cache, "unfinished", fingerprint)
            os.makedirs(left)
            with open(os.path.join(left, "1-0.outcomes"), "wb") as f:
                f.write(b"ttrace outcome journal 1\n" + bytes(5000))
            again = subprocess.run(args + ["--cache-dir", cache], capture_output=True, text=True)
            self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
            self.assertFalse(os.path.exists(left))


if __name__ == "__main__":
    unittest.main()
