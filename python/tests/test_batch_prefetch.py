"""The trainer's batches built ahead (batch_prefetch.py), by a thread
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
from gaptrain.sharded_dataset import ShardedDataset, is_sharded  # noqa: E402


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


def taken(batches, first):
    """The samples of the batch at `first`: Recorded's targets are them."""
    return batches.take(first)[1][1].tolist()


class Streams(ShardedDataset):
    """Shard s holds samples 100 s .. 100 s + sizes[s] - 1, each (i, i);
    `fail` maps a shard to how many of its opens raise ConnectionError
    after `fail_after` samples."""

    def __init__(self, sizes, fail=None, fail_after=0):
        super().__init__(len(sizes))
        self.sizes, self.fail, self.fail_after = sizes, dict(fail or {}), fail_after
        self.opens = []

    def shard(self, index):
        self.opens.append(index)
        failing = self.fail.get(index, 0) > 0
        if failing:
            self.fail[index] -= 1
        for k in range(self.sizes[index]):
            if failing and k == self.fail_after:
                raise ConnectionError("shard %d: connection reset" % index)
            yield torch.tensor([float(100 * index + k)]), 100 * index + k


def read_shards(batches, cursor=(0, 0)):
    """The batches of a ShardPrefetch from `cursor` on, each as its
    samples' list, in order."""
    got = []
    while True:
        taken_ = batches.take(cursor)
        if taken_ is None:
            return got
        samples, (_, targets), cursor = taken_
        assert samples == len(targets)
        got.append(targets.tolist())


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
            samples, (inputs, targets), after = batches.take(first)
            indices = targets.tolist()
            got.append(indices)
            self.assertEqual((samples, after), (len(indices), min(9, first + 3)))
            self.assertEqual(inputs.reshape(-1).tolist(), [float(i) for i in indices])
        self.assertEqual(got, [[7, 1, 0], [8, 2, 6], [5]])
        self.assertIsNone(batches.take(9))  # the task's end

    def test_a_batch_out_of_turn_is_built_then(self):
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 4, self.builder(Recorded(10)))
        self.assertEqual(taken(batches, 0), [9, 3, 7, 1])
        self.assertEqual(taken(batches, 8), [5, 4])  # not the one built ahead
        self.assertEqual(taken(batches, 4), [0, 8, 2, 6])

    def test_an_error_is_raised_when_its_batch_is_taken(self):
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 4,
                                               self.builder(Recorded(10, bad=[8])))
        batches.take(0)  # builds [0, 8, 2, 6] ahead: its error waits for take()
        with self.assertRaisesRegex(IndexError, "sample 8 is bad"):
            batches.take(4)
        self.assertEqual(taken(batches, 8), [5, 4])  # the builder still works

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
        self.assertEqual(taken(batches, 8), [5, 4])
        batches.receive_ahead()  # the task's end: none ahead

    def test_tensors_of_any_dtype_and_structure(self):
        data = torch.utils.data.TensorDataset(torch.arange(10.0).reshape(10, 1, 1),
                                              torch.arange(10))
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 5, self.builder(data))
        _, (inputs, targets), _ = batches.take(0)
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


    def test_shards_are_streamed_in_the_tasks_order_each_batch_from_one_shard(self):
        data = Streams([5, 4, 3, 6])
        # Positions [1, 4) of the order [3, 0, 2, 1]: shards 0, 2, 1.
        batches = batch_prefetch.ShardPrefetch([3, 0, 2, 1], 1, 4, 2, self.builder(data))
        self.assertEqual(read_shards(batches),
                         [[0, 1], [2, 3], [4], [200, 201], [202], [100, 101], [102, 103]])

    def test_a_broken_stream_is_opened_again_where_its_last_batch_ended(self):
        # Shard 0 fails once after 3 samples: the batch [2, 3] raises, and
        # taking it again reads the shard again from its start, skipping 2.
        data = Streams([5], fail={0: 1}, fail_after=3)
        batches = batch_prefetch.ShardPrefetch([0], 0, 1, 2, self.builder(data))
        _, (_, targets), cursor = batches.take((0, 0))
        self.assertEqual((targets.tolist(), cursor), ([0, 1], (0, 2)))
        with self.assertRaisesRegex(ConnectionError, "connection reset"):
            batches.take(cursor)
        self.assertEqual(read_shards(batches, cursor), [[2, 3], [4]])


class ShardedDatasetTest(unittest.TestCase):
    def test_iterated_it_yields_every_shard_and_dataloader_workers_split_them(self):
        data = Streams([2, 1, 3])
        self.assertTrue(is_sharded(data))
        self.assertFalse(is_sharded(Recorded(3)))
        self.assertEqual([t for _, t in data], [0, 1, 100, 200, 201, 202])
        loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=2)
        self.assertEqual(sorted(int(t) for _, t in loader), [0, 1, 100, 200, 201, 202])
        with self.assertRaisesRegex(ValueError, "num_shards: must be an int >= 1"):
            ShardedDataset(0)


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

    def test_two_batches_are_built_ahead_by_default(self):
        for ahead, reads in ((2, [9, 3, 7, 1, 0, 8]), (1, [9, 3, 7, 1])):
            data = Recorded(10)
            b = self.builder(data)
            batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 2, b, **(
                {} if ahead == 2 else {"ahead": ahead}))
            self.assertEqual(taken(batches, 0), [9, 3])
            b._pool.shutdown(wait=True)  # whatever was asked for is built
            self.assertEqual(data.reads, reads, "ahead %d" % ahead)


@unittest.skipUnless(sys.platform.startswith("linux"), "fork: Linux only")
class ProcessBuilderTest(Common, unittest.TestCase):
    make = staticmethod(batch_process.ProcessBuilder)

    def test_the_dataset_is_read_in_the_child_which_shutdown_ends(self):
        data = Recorded(10)
        b = self.builder(data)
        batches = batch_prefetch.BatchPrefetch(ORDER, 0, 10, 5, b)
        self.assertEqual(taken(batches, 0), [9, 3, 7, 1, 0])
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
