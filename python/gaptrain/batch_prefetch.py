"""A task's batches built one ahead on a background thread: the trainer
computes and pushes batch k while batch k+1 is collated.

Collating is the user's Dataset.__getitem__ per sample, mostly Python and
small torch ops (2.5 ms of a 5 ms step for the benchmark's MLP), and it needs
nothing from the model or the master: the task's positions are known when it
is assigned. Forward, backward and the push's waits run outside the GIL, so
on a second core the next batch is built meanwhile. The step itself is as
before: each batch is trained on the parameters the previous push brought.

All of a trainer's batches are built on its one builder thread, so the
dataset is never used by two threads at once. A dataset drawing from torch's
global random generator (augmentation) while the model does too (dropout)
now sees those draws interleaved in whatever order the two threads reach
them; a generator of the dataset's own keeps its sequence, as in a DataLoader
worker. An error raised by the dataset is raised by take(), where its batch
is wanted, as when batches were built on demand."""

import concurrent.futures

import torch


def collate(dataset, indices):
    """(inputs, targets) of `dataset` at `indices`."""
    if isinstance(dataset, torch.utils.data.TensorDataset):
        index = torch.tensor(indices, dtype=torch.long)
        return tuple(t[index] for t in dataset.tensors)
    return torch.utils.data.default_collate([dataset[i] for i in indices])


def builder():
    """The thread a trainer's batches are built on (shutdown() when done)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                 thread_name_prefix="gaptrain-batches")


class BatchPrefetch:
    """The batches of positions [begin, end) of `order`, `batch_size` each;
    take() returns one and starts building the next on `executor`."""

    def __init__(self, dataset, order, begin, end, batch_size, executor):
        self._dataset, self._order = dataset, order
        self._end, self._batch_size = end, batch_size
        self._executor = executor
        self._pending = None  # (first position, future of _build)

    def _build(self, first):
        indices = [self._order[p] for p in range(first, min(self._end, first + self._batch_size))]
        try:
            inputs, targets = collate(self._dataset, indices)
            return indices, inputs, targets
        except Exception as e:  # raised by take(), where the batch is wanted
            return e

    def take(self, first):
        """The batch at position `first`, (indices, inputs, targets): the one
        built ahead, or built now (on the builder thread too)."""
        pending, self._pending = self._pending, None
        if pending is None or pending[0] != first:
            pending = (first, self._executor.submit(self._build, first))
        batch = pending[1].result()
        after = first + self._batch_size
        if after < self._end:
            self._pending = (after, self._executor.submit(self._build, after))
        if isinstance(batch, Exception):
            raise batch
        return batch
