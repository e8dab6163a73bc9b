"""ShardStream: a sharded dataset's batches read in order from the shard a
task names, on whichever side builds the trainer's batches (the batch
process or thread, batch_prefetch.py).

read(shard, start, count) returns the samples [start, start + count) of
the shard, collated, how many there were, and whether the shard ended
there. Consecutive reads
continue one open iterator; any other read (a new shard, or the same shard
again after an error or a hand-back) opens the shard and skips to `start`,
so a stream broken by its store is resumed where its last batch ended."""

import itertools

import torch


class ShardStream:
    def __init__(self, dataset):
        self._dataset = dataset
        self._open = None  # (shard, next position, iterator)

    def read(self, shard, start, count):
        """(batch or None when no sample was left, its samples, ended)."""
        if self._open is not None and self._open[:2] == (shard, start):
            iterator = self._open[2]
        else:
            self._open = None
            iterator = iter(self._dataset.shard(shard))
            for _ in itertools.islice(iterator, start):
                pass
        samples = list(itertools.islice(iterator, count))
        ended = len(samples) < count
        self._open = None if ended else (shard, start + len(samples), iterator)
        batch = torch.utils.data.default_collate(samples) if samples else None
        return batch, len(samples), ended

    def read_or_error(self, shard, start, count):
        """read()'s result, or the exception it raised (the stream is then
        opened again by the next read)."""
        try:
            return self.read(shard, start, count)
        except Exception as e:  # noqa: BLE001 (raised where the batch is wanted)
            self._open = None
            return e
