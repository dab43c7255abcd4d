"""The capture's background writer: tensors already copied to the host wait here while one
thread encodes them and writes the HDF5 file, so training waits for the device-to-host copy
only, never for the disk.

What the queue holds is bounded in bytes (`Capture(max_queued_bytes=...)`): a tensor that
would take it past the bound waits, on the training thread, until the writer has written
enough (one tensor larger than the bound is let in alone, once the queue is empty). So when
the disk is slower than training, training slows down to the disk's pace instead of filling
host memory; `stats` says how long it waited."""

import queue
import threading
import time


class WriteQueue:
    def __init__(self, write, max_bytes):
        """write(item) is called on the writer thread for each item, in order."""
        if max_bytes <= 0:
            raise ValueError(f"max_queued_bytes must be positive, not {max_bytes}")
        self._write = write
        self._max_bytes = max_bytes
        self._queued_bytes = 0
        self._room = threading.Condition()
        self._items = queue.Queue()
        self._error = None
        self.stats = {"tensors": 0, "bytes": 0, "peak_queued_bytes": 0,
                      "seconds_waiting_for_room": 0.0, "seconds_writing": 0.0}
        self._thread = threading.Thread(target=self._loop, name="ttrace-writer", daemon=True)
        self._thread.start()

    def reserve(self, nbytes):
        """Waits until `nbytes` more fit under the bound (training thread), then holds them."""
        start = time.perf_counter()
        with self._room:
            while self._queued_bytes > 0 and self._queued_bytes + nbytes > self._max_bytes:
                self._room.wait()
            self._queued_bytes += nbytes
            self.stats["peak_queued_bytes"] = max(self.stats["peak_queued_bytes"],
                                                  self._queued_bytes)
        self.stats["seconds_waiting_for_room"] += time.perf_counter() - start

    def put(self, item, nbytes):
        """Queues `item`, whose `nbytes` were reserved."""
        self._items.put((item, nbytes))

    def close(self):
        """Writes what is queued and stops the writer thread."""
        self._items.put(None)
        self._thread.join()

    @property
    def error(self):
        """The first exception write() raised; later items were dropped."""
        return self._error

    def _loop(self):
        while True:
            entry = self._items.get()
            if entry is None:
                return
            item, nbytes = entry
            if self._error is None:  # after a failure, drain: close() reports it
                start = time.perf_counter()
                try:
                    self._write(item)
                    self.stats["tensors"] += 1
                    self.stats["bytes"] += nbytes
                except Exception as e:  # surfaced on the training thread by the capture
                    self._error = e
                self.stats["seconds_writing"] += time.perf_counter() - start
            with self._room:
                self._queued_bytes -= nbytes
                self._room.notify_all()
