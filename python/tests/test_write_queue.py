"""The capture's write queue: the host memory it holds stays under its bound, training waits
at the bound instead, a tensor larger than the bound still goes through, and a write error is
kept for the training thread."""

import threading
import time
import unittest

from ttrace.write_queue import WriteQueue


class WriteQueueTest(unittest.TestCase):
    def test_memory_stays_under_the_bound_and_training_waits(self):
        written, release = [], threading.Event()

        def slow_write(item):
            release.wait()  # the disk is slower than training
            written.append(item)

        q = WriteQueue(slow_write, max_bytes=100)
        for i in range(3):
            q.reserve(30)
            q.put(i, 30)
        waited = threading.Event()

        def fourth():
            q.reserve(30)  # 120 > 100: must wait for the writer
            waited.set()
            q.put(3, 30)

        t = threading.Thread(target=fourth)
        t.start()
        self.assertFalse(waited.wait(0.3), "the fourth tensor went past the bound")
        release.set()
        t.join(5)
        self.assertTrue(waited.is_set())
        q.close()
        self.assertEqual(written, [0, 1, 2, 3])
        self.assertLessEqual(q.stats["peak_queued_bytes"], 100)
        self.assertGreater(q.stats["seconds_waiting_for_room"], 0.2)
        self.assertEqual((q.stats["tensors"], q.stats["bytes"]), (4, 120))

    def test_a_tensor_larger_than_the_bound_goes_alone(self):
        written = []
        q = WriteQueue(lambda item: (time.sleep(0.05), written.append(item)), max_bytes=10)
        q.reserve(5)
        q.put("small", 5)
        q.reserve(50)  # waits for the empty queue, then holds it alone
        q.put("large", 50)
        q.close()
        self.assertEqual(written, ["small", "large"])
        self.assertEqual(q.stats["peak_queued_bytes"], 50)

    def test_the_first_write_error_is_kept_and_the_rest_drained(self):
        def failing(item):
            if item == 1:
                raise OSError("disk full")

        q = WriteQueue(failing, max_bytes=10)
        for i in range(4):
            q.reserve(5)
            q.put(i, 5)
        q.close()
        self.assertIsInstance(q.error, OSError)
        self.assertEqual(q.stats["tensors"], 1)
        with self.assertRaises(ValueError):
            WriteQueue(failing, max_bytes=0)


if __name__ == "__main__":
    unittest.main()
