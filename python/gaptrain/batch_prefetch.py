"""A task's batches built one ahead while the trainer computes and pushes
the current one: the task's positions are known when it is assigned, and
collating needs nothing from the model or the master.

Collating is the user's Dataset.__getitem__ per sample, mostly Python and
small torch ops (about half of a 5 ms step for the benchmark's MLP). Where
the platform forks (Linux), it runs in a child process forked when train()
starts, before any gRPC channel or thread exists: the dataset is the
parent's copy, the batch comes back pickled, and the trainer's thread never
waits for the GIL behind it (as a DataLoader worker; ProcessBuilder).
Elsewhere, or with train(batch_process=False), it runs on one background
thread (ThreadBuilder), which shares the GIL with the trainer's thread.
Each batch is still trained on the parameters the previous push brought.

All of a trainer's batches are built by its one builder, so the dataset is
never used by two threads or processes at once. In the child, torch runs
one thread and its random generator is seeded apart from the parent's (as
DataLoader seeds its workers), so augmentation there does not repeat the
model's dropout draws. An error raised by the dataset is raised by take(),
where its batch is wanted, as when batches were built on demand."""

import collections
import concurrent.futures
import ctypes
import fcntl
import logging
import os
import pickle
import signal
import struct
import sys

import torch

log = logging.getLogger("gaptrain")


def collate(dataset, indices):
    """(inputs, targets) of `dataset` at `indices`."""
    if isinstance(dataset, torch.utils.data.TensorDataset):
        index = torch.tensor(indices, dtype=torch.long)
        return tuple(t[index] for t in dataset.tensors)
    return torch.utils.data.default_collate([dataset[i] for i in indices])


def _collate_or_error(dataset, indices):
    try:
        return collate(dataset, indices)
    except Exception as e:  # raised by take(), where the batch is wanted
        return e


class ThreadBuilder:
    """Batches collated on one background thread of this process."""

    def __init__(self, dataset):
        self._dataset = dataset
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="gaptrain-batches")

    def submit(self, indices):
        return self._pool.submit(_collate_or_error, self._dataset, indices)

    def shutdown(self):
        self._pool.shutdown(wait=False, cancel_futures=True)


class _PackedTensor:
    """A tensor as a numpy byte array: pickled with protocol 5, its bytes go
    out of band, written to the pipe as they are and read into one buffer
    that becomes the tensor (torch's own pickling for processes passes each
    tensor through shared memory and a descriptor handshake, which cost
    more than the collate)."""

    def __init__(self, t):
        t = t.detach().contiguous()
        self.dtype, self.shape = t.dtype, tuple(t.shape)
        self.data = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else None

    def tensor(self):
        if self.data is None:
            return torch.empty(self.shape, dtype=self.dtype)
        return torch.from_numpy(self.data).view(self.dtype).reshape(self.shape)


def _pack(batch):
    if isinstance(batch, torch.Tensor):
        return _PackedTensor(batch)
    if isinstance(batch, (tuple, list)):
        return type(batch)(_pack(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _pack(v) for k, v in batch.items()}
    return batch


def _unpack(batch):
    if isinstance(batch, _PackedTensor):
        return batch.tensor()
    if isinstance(batch, (tuple, list)):
        return type(batch)(_unpack(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _unpack(v) for k, v in batch.items()}
    return batch


_HEADER = struct.Struct("<QI")  # pickle's length, out-of-band buffers' count
_SIZE = struct.Struct("<Q")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_F_SETPIPE_SZ = 1031  # linux/fcntl.h


def _write_message(fd, obj):
    """`obj` pickled: a header, the pickle, then its out-of-band buffers
    (the tensors' bytes) as they are."""
    buffers = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raw = [b.raw() for b in buffers]
    head = [_HEADER.pack(len(data), len(raw))] + [_SIZE.pack(r.nbytes) for r in raw]
    _write_all(fd, memoryview(b"".join(head) + data))
    for r in raw:
        _write_all(fd, r.cast("B"))


def _write_all(fd, view):
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd, size):
    out = bytearray(size)
    view, got = memoryview(out), 0
    while got < size:
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise EOFError("the batch process exited")
        got += n
    return out


def _read_message(fd):
    length, count = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    sizes = [_SIZE.unpack(_read_exact(fd, _SIZE.size))[0] for _ in range(count)]
    data = _read_exact(fd, length)
    return pickle.loads(data, buffers=[_read_exact(fd, n) for n in sizes])


def _child_loop(dataset, requests, replies, seed):
    torch.set_num_threads(1)  # no OpenMP pool after fork, as DataLoader workers
    torch.manual_seed(seed)
    # The trainer handles SIGINT and SIGTERM, then closes the requests; a
    # trainer killed outright takes the child with it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    while True:
        try:
            indices = _read_message(requests)
        except EOFError:
            return
        batch = _collate_or_error(dataset, indices)
        try:
            _write_message(replies, batch if isinstance(batch, Exception) else _pack(batch))
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            _write_message(replies, RuntimeError("a batch that cannot be pickled: %s" % e))


class _Reply:
    def __init__(self, builder):
        self._builder = builder
        self._done = False
        self._value = None

    def result(self):
        while not self._done:
            self._builder._read_next()
        return self._value


class ProcessBuilder:
    """Batches collated in one child process, forked now, over two pipes:
    requests (indices) in, replies (the batch's tensors as raw bytes) out,
    answered in order."""

    def __init__(self, dataset):
        seed = int(torch.randint(0, 2**62, (1,)).item())
        requests_r, self._requests = os.pipe()
        self._replies, replies_w = os.pipe()
        for fd in (self._requests, replies_w):
            try:  # a batch in one write where the kernel allows it
                fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
            except OSError:
                pass
        self._pid = os.fork()
        if self._pid == 0:  # the child
            code = 0
            try:
                os.close(self._requests)
                os.close(self._replies)
                _child_loop(dataset, requests_r, replies_w, seed)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(requests_r)
        os.close(replies_w)
        self._waiting = collections.deque()

    def submit(self, indices):
        _write_message(self._requests, list(indices))
        reply = _Reply(self)
        self._waiting.append(reply)
        return reply

    def _read_next(self):
        reply = self._waiting.popleft()
        try:
            value = _read_message(self._replies)
        except EOFError as e:
            value = RuntimeError(str(e))
        reply._value = value if isinstance(value, Exception) else _unpack(value)
        reply._done = True

    def shutdown(self):
        if self._pid is None:
            return
        os.close(self._requests)
        os.close(self._replies)
        try:
            os.kill(self._pid, signal.SIGKILL)  # it may be in the middle of a batch
            os.waitpid(self._pid, 0)
        except OSError:
            pass
        self._pid = None


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
    take() returns one and starts building the next on `builder`."""

    def __init__(self, order, begin, end, batch_size, builder):
        self._order = order
        self._end, self._batch_size = end, batch_size
        self._builder = builder
        self._pending = None  # (first position, indices, future)

    def _submit(self, first):
        indices = [self._order[p] for p in range(first, min(self._end, first + self._batch_size))]
        return first, indices, self._builder.submit(indices)

    def take(self, first):
        """The batch at position `first`, (indices, inputs, targets): the one
        built ahead, or built now (by the builder too)."""
        pending, self._pending = self._pending, None
        if pending is None or pending[0] != first:
            pending = self._submit(first)
        _, indices, future = pending
        batch = future.result()
        after = first + self._batch_size
        if after < self._end:
            self._pending = self._submit(after)
        if isinstance(batch, Exception):
            raise batch
        inputs, targets = batch
        return indices, inputs, targets
