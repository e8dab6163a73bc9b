"""The trainer's batches built one ahead (batch_prefetch.py), by a thread
and by a forked child process (batch_process.py): in the task's order, each once, nothing past
the task, received ahead while the master works, a dataset's error raised where its batch is wanted, tensors of any
dtype and shape back intact, the child gone after shutdown."""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from gaptrain import batch_prefetch, batch_process  # noqa: E402


class Recorded(torch.utils.data.Dataset):
    """Sample i is (i, i); every access is recorded with its thread; `bad` raises."""

    def __init__(self, n, bad=()):
        self.n, self.bad, self.reads, self.threads = n, set(bad), [], set()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.threads.add(threading.get_ident())
        if i in self.bad:
            raise IndexError("sample %d is bad" % i)
        self.reads.append(i)
        return torch.tensor([float(i)]), i


ORDER = [9, 3, 7, 1, 0, 8, 2, 6, 5, 4]


class Common:
    """Cases for both builders; self.make(dataset) gives one."""

    def setUp(self):
        self.builders = []

    def tearDown(self):
        for b in self.builders:
            b.shutdown()

    def builder(self, dataset):
        b = self.make(dataset)
        self.builders.append(b)
        return b

    def test_batches_in_order(self):
        data = Recorded(10)
        batches = batch_prefetch.BatchPrefetch(ORDER, 2, 9, 3, self.builder(data))
        got = []
        for first in range(2, 9, 3):  # positions [2, 9): 3 + 3 + 1
            indices, (inputs, targets) = batches.take(first)
            got.append(indices)
            self.assertEqual(targets.tolist(), indices)
            self.assertEqual(inputs.reshape(-1).tolist(), [float(i) for i in indices])
        self.assertEqual(got, [[7, 1, 0], [8, 2, 6], [5]])

    def test_a_batch_out_of_turn_is_built_then(self):
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 4, self.builder(Recorded(10)))
        self.assertEqual(batches.take(0)[0], [9, 3, 7, 1])
        self.assertEqual(batches.take(8)[0], [5, 4])  # not the one built ahead
        self.assertEqual(batches.take(4)[0], [0, 8, 2, 6])

    def test_an_error_is_raised_when_its_batch_is_taken(self):
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 4,
                                               self.builder(Recorded(10, bad=[8])))
        batches.take(0)  # builds [0, 8, 2, 6] ahead: its error waits for take()
        with self.assertRaisesRegex(IndexError, "sample 8 is bad"):
            batches.take(4)
        self.assertEqual(batches.take(8)[0], [5, 4])  # the builder still works

    def test_received_ahead_it_is_the_batch_taken_and_errors_wait(self):
        data = Recorded(10, bad=[8])
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 4, self.builder(data))
        batches.receive_ahead()  # nothing built ahead yet: nothing to do
        batches.take(0)
        batches.receive_ahead()  # [0, 8, 2, 6]: its error waits for take()
        batches.receive_ahead()  # again: the same batch, already here
        with self.assertRaisesRegex(IndexError, "sample 8 is bad"):
            batches.take(4)
        batches.receive_ahead()
        indices, (_, targets) = batches.take(8)
        self.assertEqual((indices, targets.tolist()), ([5, 4], [5, 4]))
        batches.receive_ahead()  # the task's end: none ahead

    def test_tensors_of_any_dtype_and_structure(self):
        data = torch.utils.data.TensorDataset(torch.arange(10.0).reshape(10, 1, 1),
                                              torch.arange(10))
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 5, self.builder(data))
        _, (inputs, targets) = batches.take(0)
        self.assertEqual(targets.tolist(), [9, 3, 7, 1, 0])
        self.assertEqual((inputs.dtype, tuple(inputs.shape)), (torch.float32, (5, 1, 1)))
        pairs = [({"x": torch.full((2,), i, dtype=torch.bfloat16), "n": i}, torch.tensor(i))
                 for i in range(4)]
        b = self.builder(pairs)
        inputs, targets = b.submit([2, 0]).result()
        self.assertEqual(inputs["x"].dtype, torch.bfloat16)
        self.assertEqual(inputs["x"].tolist(), [[2.0, 2.0], [0.0, 0.0]])
        self.assertEqual(inputs["n"].tolist(), [2, 0])
        self.assertEqual(targets.tolist(), [2, 0])


class ThreadBuilderTest(Common, unittest.TestCase):
    make = staticmethod(batch_prefetch.ThreadBuilder)

    def test_one_thread_not_the_callers_and_nothing_past_the_task(self):
        data = Recorded(10)
        b = self.builder(data)
        batches = batch_prefetch.BatchPrefetch(ORDER, 2, 9, 3, b)
        for first in range(2, 9, 3):
            batches.take(first)
        b.shutdown()
        b._pool.shutdown(wait=True)  # whatever was in flight is done
        self.assertEqual(data.reads, [7, 1, 0, 8, 2, 6, 5])
        self.assertEqual(len(data.threads), 1)
        self.assertNotIn(threading.get_ident(), data.threads)


@unittest.skipUnless(sys.platform.startswith("linux"), "fork: Linux only")
class ProcessBuilderTest(Common, unittest.TestCase):
    make = staticmethod(batch_process.ProcessBuilder)

    def test_the_dataset_is_read_in_the_child_which_shutdown_ends(self):
        data = Recorded(10)
        b = self.builder(data)
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 5, b)
        self.assertEqual(batches.take(0)[0], [9, 3, 7, 1, 0])
        self.assertEqual(data.reads, [])  # the child's copy was read, not ours
        pid = b._pid
        b.shutdown()
        with self.assertRaises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left behind

    def test_start_builder_forks_on_linux_and_threads_when_asked(self):
        b = batch_prefetch.start_builder(Recorded(4))
        self.builders.append(b)
        self.assertIsInstance(b, batch_process.ProcessBuilder)
        t = batch_prefetch.start_builder(Recorded(4), process=False)
        self.builders.append(t)
        self.assertIsInstance(t, batch_prefetch.ThreadBuilder)


if __name__ == "__main__":
    unittest.main()
