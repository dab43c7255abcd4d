"""Device-to-host copies that never synchronize the device.

A CUDA tensor is copied into page-locked (pinned) host memory with a non-blocking copy on the
stream that is current when the hook runs, the stream that produced the tensor, and an event
is recorded after the copy: the training thread goes on at once, and the writer thread waits
for the event before it reads the host copy. The copy is ordered after the kernels that
computed the tensor and before anything the training later queues on that stream, so a
parameter the optimizer updates in place, a gradient that accumulates, or an activation a
later in-place op overwrites is copied as it was when recorded. (A side stream would overlap
the copy with later kernels only if the training stream did not wait for it, and then those
in-place updates could race the copy; waiting for it costs what copying in order does.)

Pinned buffers come from torch's caching host allocator, which hands a freed buffer out again
only once the copies that used it are done; how much is held at once is the write queue's
bound (`Capture(max_queued_bytes=...)`): when the staged copies reach it, the training thread
waits for the writer, and so for the oldest copy, and `stats` counts that time. CPU tensors
are copied at once, as before."""

import torch


class Staged:
    """A host copy of a tensor and, for a copy still in flight, the event that marks its end."""

    __slots__ = ("host", "event")

    def __init__(self, host, event=None):
        self.host = host
        self.event = event

    def ready(self):
        """The host copy, once the device has written it (the writer thread's wait)."""
        if self.event is not None:
            self.event.synchronize()
            self.event = None
        return self.host


def stage(t):
    """Starts copying tensor `t` to the host; returns a Staged whose ready() gives the copy."""
    t = t.detach()
    if t.device.type != "cuda":
        # a copy: parameters and accumulated gradients change in place after this point
        return Staged(t.to("cpu", copy=True))
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    host.copy_(t, non_blocking=True)
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(t.device))
    return Staged(host, event)
