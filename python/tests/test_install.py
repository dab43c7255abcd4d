"""The tests run against the capture package as installed (pip install ./python), and that
installation is the checkout's: a stale .venv would test old code."""

import filecmp
import os
import unittest

import ttrace

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "ttrace"))


class InstalledPackageTest(unittest.TestCase):
    def test_imported_from_the_environment_not_the_checkout(self):
        installed = os.path.dirname(os.path.abspath(ttrace.__file__))
        self.assertNotEqual(installed, SOURCE, "ttrace was imported from the source folder "
                            "(PYTHONPATH?): the tests must run on the installed package")

    def test_installed_files_are_the_checkouts(self):
        installed = os.path.dirname(os.path.abspath(ttrace.__file__))
        sources = sorted(f for f in os.listdir(SOURCE) if f.endswith(".py"))
        self.assertEqual(sorted(f for f in os.listdir(installed) if f.endswith(".py")), sources,
                         "run scripts/setup-venv.sh: the installed package has other modules")
        _, mismatch, errors = filecmp.cmpfiles(SOURCE, installed, sources, shallow=False)
        self.assertEqual((mismatch, errors), ([], []),
                         "run scripts/setup-venv.sh: the installed package is not the checkout's")


if __name__ == "__main__":
    unittest.main()
