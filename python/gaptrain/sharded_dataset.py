"""ShardedDataset: a training set read as streams, one per shard (tar or
Parquet files, text files, objects in a bucket), for jobs with
spec.data.format shards. The coordinator hands each trainer whole shards
(docs/trainingjob.md, spec.data.shards); the trainer streams a shard's
samples through shard(index) and batches them as they come.

It is an IterableDataset: iterated directly (or by a DataLoader, whose
workers split the shards between them) it yields every shard's samples in
order, so the same object serves a plain PyTorch loop."""

import torch


class ShardedDataset(torch.utils.data.IterableDataset):
    """Subclass it and implement shard(index): an iterable of the samples
    of shard `index`, in [0, num_shards), the same samples each time it is
    called (a shard a trainer hands back is read again from its start).
    Shuffle within a shard as you like; the shards' order is the job's,
    shuffled per epoch with spec.data.shuffleSeed."""

    def __init__(self, num_shards):
        if not isinstance(num_shards, int) or num_shards < 1:
            raise ValueError("num_shards: must be an int >= 1, got %r" % (num_shards,))
        self.num_shards = num_shards

    def shard(self, index):
        raise NotImplementedError("a ShardedDataset implements shard(index)")

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        first, step = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(first, self.num_shards, step):
            yield from self.shard(index)


def is_sharded(dataset):
    """Whether `dataset` is read shard by shard: a ShardedDataset, or any
    object with an int num_shards and a shard(index) method."""
    return isinstance(getattr(dataset, "num_shards", None), int) and callable(
        getattr(dataset, "shard", None))
