#!/usr/bin/env python3
"""Drops the given files from the page cache (POSIX_FADV_DONTNEED on clean pages), so that
the next read comes from the disk. Needs no privileges and never writes to the files.
Usage: evict_page_cache.py FILE..."""
import os
import sys

for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
