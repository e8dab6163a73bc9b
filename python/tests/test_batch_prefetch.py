"""The trainer's batches built one ahead on a background thread
(batch_prefetch.py): in the task's order, each once, nothing past the task,
one thread only, a dataset's error raised where its batch is wanted."""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from gaptrain import batch_prefetch  # noqa: E402


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


class BatchPrefetchTest(unittest.TestCase):
    ORDER = [9, 3, 7, 1, 0, 8, 2, 6, 5, 4]

    def setUp(self):
        self.executor = batch_prefetch.builder()

    def tearDown(self):
        self.executor.shutdown()

    def test_batches_in_order_each_built_once(self):
        data = Recorded(10)
        batches = batch_prefetch.BatchPrefetch(data, self.ORDER, 2, 9, 3, self.executor)
        got = []
        for first in range(2, 9, 3):  # positions [2, 9): 3 + 3 + 1
            indices, inputs, targets = batches.take(first)
            got.append(indices)
            self.assertEqual(targets.tolist(), indices)
            self.assertEqual(inputs.reshape(-1).tolist(), [float(i) for i in indices])
        self.assertEqual(got, [[7, 1, 0], [8, 2, 6], [5]])
        self.executor.shutdown()  # whatever was in flight is done
        self.assertEqual(data.reads, [7, 1, 0, 8, 2, 6, 5])  # nothing past the task
        self.assertEqual(len(data.threads), 1)
        self.assertNotIn(threading.get_ident(), data.threads)

    def test_a_batch_out_of_turn_is_built_then(self):
        data = Recorded(10)
        batches = batch_prefetch.BatchPrefetch(data, self.ORDER, 0, 10, 4, self.executor)
        self.assertEqual(batches.take(0)[0], [9, 3, 7, 1])
        self.assertEqual(batches.take(8)[0], [5, 4])  # not the one built ahead
        self.assertEqual(batches.take(4)[0], [0, 8, 2, 6])

    def test_an_error_is_raised_when_its_batch_is_taken(self):
        data = Recorded(10, bad=[8])
        batches = batch_prefetch.BatchPrefetch(data, self.ORDER, 0, 10, 4, self.executor)
        batches.take(0)  # builds [0, 8, 2, 6] ahead: its error waits for take()
        with self.assertRaisesRegex(IndexError, "sample 8 is bad"):
            batches.take(4)

    def test_tensor_dataset(self):
        data = torch.utils.data.TensorDataset(torch.arange(10.0), torch.arange(10))
        batches = batch_prefetch.BatchPrefetch(data, self.ORDER, 0, 10, 5, self.executor)
        self.assertEqual(batches.take(0)[2].tolist(), [9, 3, 7, 1, 0])


if __name__ == "__main__":
    unittest.main()
