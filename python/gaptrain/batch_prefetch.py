"""A task's batches built ahead (two; one of streamed shards) while the
trainer computes and pushes the current one: the task's positions are known
when it is assigned, and collating needs nothing from the model or the
master.

Collating is the user's Dataset.__getitem__ per sample, mostly Python and
small torch ops (about half of a 5 ms step for the benchmark's MLP). Where
the platform forks (Linux) it runs in a child process forked when train()
starts (batch_process.py), else, or with train(batch_process=False), on one
background thread (ThreadBuilder), which shares the GIL with the trainer's
thread. Each batch is still trained on the parameters the previous push
brought. The trainer receives the batch built ahead while the master
applies its push (receive_ahead), a moment it would otherwise idle.

All of a trainer's batches are built by its one builder, so the dataset is
never used by two threads or processes at once. An error raised by the
dataset is raised by take(), where its batch is wanted, as when batches
were built on demand."""

import collections
import concurrent.futures
import logging
import sys

from gaptrain.batch_process import ProcessBuilder
from gaptrain.collate import collate_or_error
from gaptrain.shard_stream import ShardStream

log = logging.getLogger("gaptrain")


class ThreadBuilder:
    """Batches collated on one background thread of this process."""

    def __init__(self, dataset):
        self._dataset = dataset
        self._stream = ShardStream(dataset) if hasattr(dataset, "shard") else None
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="gaptrain-batches")

    def submit(self, indices):
        return self._pool.submit(collate_or_error, self._dataset, indices)

    def submit_shard(self, shard, start, count):
        return self._pool.submit(self._stream.read_or_error, shard, start, count)

    def shutdown(self):
        self._pool.shutdown(wait=False, cancel_futures=True)


def start_builder(dataset, process=True):
    """ProcessBuilder where the platform forks and `process` is true, else
    ThreadBuilder. Call before any gRPC channel exists."""
    if process and sys.platform.startswith("linux"):
        try:
            return ProcessBuilder(dataset)
        except OSError as e:
            log.warning("batches are collated on a thread: no child process (%s)", e)
    return ThreadBuilder(dataset)


class BatchPrefetch:
    """The batches of positions [begin, end) of `order`, `batch_size` each;
    take() returns one and keeps the next `ahead` building on `builder`, the
    first of which receive_ahead() may receive before it is taken.
    ShardPrefetch is its twin for sharded data (one ahead: where a shard's
    next batch starts is known only once its previous one is read).

    Two ahead by default: the builder shares a core with the master and
    gRPC, and a batch that started a whole step earlier is ready even when
    the builder was kept waiting for part of one."""

    def __init__(self, order, begin, end, batch_size, builder, ahead=2):
        self._order = order
        self._end, self._batch_size = end, batch_size
        self._builder = builder
        self._ahead = ahead
        self._pending = collections.deque()  # (first position, indices, future), in order

    def _submit(self, first):
        indices = [self._order[p] for p in range(first, min(self._end, first + self._batch_size))]
        return first, indices, self._builder.submit(indices)

    def receive_ahead(self):
        """Waits for the batch built ahead and receives it, so the take()
        that wants it finds it here: work for a moment the trainer would
        otherwise idle (the master applying its push). Whatever went wrong
        is raised by take()."""
        if not self._pending:
            return
        try:
            self._pending[0][2].result()
        except Exception:  # noqa: BLE001 (take() raises it)
            pass

    def take(self, first):
        """The batch at position `first`, (samples, batch, the next batch's
        position) with the batch as collated: the one built ahead, or built
        now (by the builder too); None at `end`."""
        if first >= self._end:
            return None
        if not self._pending or self._pending[0][0] != first:
            self._pending.clear()  # built for other positions: dropped
            self._pending.append(self._submit(first))
        _, indices, future = self._pending.popleft()
        batch = future.result()
        after = first + self._batch_size
        position = self._pending[-1][0] + self._batch_size if self._pending else after
        while len(self._pending) < self._ahead and position < self._end:
            self._pending.append(self._submit(position))
            position += self._batch_size
        if isinstance(batch, Exception):
            raise batch
        return len(indices), batch, min(after, self._end)


class ShardPrefetch:
    """The batches of the shards at positions [begin, end) of `order`, read
    as streams (shard_stream.py), `batch_size` samples each (a shard's last
    batch may be shorter): take() returns one and starts reading the next,
    as BatchPrefetch does."""

    def __init__(self, order, begin, end, batch_size, builder):
        self._shards = [order[p] for p in range(begin, end)]
        self._batch_size = batch_size
        self._builder = builder
        self._pending = None  # (cursor, future)

    def _submit(self, cursor):
        shard, start = cursor
        return cursor, self._builder.submit_shard(self._shards[shard], start, self._batch_size)

    def receive_ahead(self):
        if self._pending is None:
            return
        try:
            self._pending[1].result()
        except Exception:  # noqa: BLE001 (take() raises it)
            pass

    def take(self, cursor):
        """The batch at `cursor` = (shard within the task, first sample):
        (samples, batch, next cursor), or None when the task's shards are
        read. Starting with (0, 0), pass the cursor each take() returned."""
        while cursor[0] < len(self._shards):
            pending, self._pending = self._pending, None
            if pending is None or pending[0] != cursor:
                pending = self._submit(cursor)
            reply = pending[1].result()
            if isinstance(reply, Exception):
                raise reply
            batch, samples, ended = reply
            shard, start = cursor
            cursor = (shard + 1, 0) if ended else (shard, start + samples)
            if cursor[0] < len(self._shards):
                self._pending = self._submit(cursor)
            if batch is not None:
                return samples, batch, cursor
        return None

