"""Runs a test body on every rank of a gloo CPU job of forked processes."""

import os
import socket
import tempfile

import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world, port, body, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        body(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run_ranks(world, body, *args):
    """Calls body(rank, world, *args) on `world` forked processes joined in one gloo process
    group; an exception on any rank fails the caller with that rank's traceback."""
    # imported once here rather than by the optimizers in every forked rank (seconds each)
    import torch._dynamo  # noqa: F401
    mp.start_processes(_entry, args=(world, _free_port(), body, args), nprocs=world,
                       start_method="fork")


def temporary_folder(test):
    """A temporary folder removed when `test` (a TestCase) ends."""
    tmp = tempfile.TemporaryDirectory()
    test.addCleanup(tmp.cleanup)
    return tmp.name
