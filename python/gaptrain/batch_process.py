"""ProcessBuilder: a trainer's batches collated in one child process,
forked when train() starts, before the trainer has a gRPC channel or a
thread of its own, as a DataLoader worker: the child reads the parent's
copy of the dataset, so the trainer's thread never waits for the GIL behind
the collate's Python.

Requests (indices, or a shard's next samples) go in over one pipe and replies come back over another,
in order: each message is a header, a protocol-5 pickle and its out-of-band
buffers, the tensors' bytes as they are, read into one buffer that becomes
the tensor (torch's own pickling for processes passes each tensor through
shared memory and a descriptor handshake, which cost more than the
collate). In the child, torch and OpenBLAS run one thread, its random generator is
seeded apart from the parent's (as DataLoader seeds its workers), SIGINT
and SIGTERM are left to the trainer, and the child dies with it
(PR_SET_PDEATHSIG)."""

import collections
import ctypes
import fcntl
import os
import pickle
import signal
import struct

import torch

from gaptrain.collate import collate_or_error
from gaptrain.compute_threads import set_compute_threads
from gaptrain.shard_stream import ShardStream


class _PackedTensor:
    """A tensor as a numpy byte array, whose bytes protocol 5 pickles out of
    band."""

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
    set_compute_threads(1)  # no OpenMP or OpenBLAS pool after fork, as DataLoader workers
    torch.manual_seed(seed)
    # The trainer handles SIGINT and SIGTERM, then closes the requests; a
    # trainer killed outright takes the child with it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    stream = ShardStream(dataset) if hasattr(dataset, "shard") else None
    while True:
        try:
            request = _read_message(requests)
        except EOFError:
            return
        if isinstance(request, tuple):  # (shard, start, count)
            batch = stream.read_or_error(*request)
        else:  # indices
            batch = collate_or_error(dataset, request)
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
        return self._request(list(indices))

    def submit_shard(self, shard, start, count):
        """ShardStream.read(shard, start, count) in the child."""
        return self._request((shard, start, count))

    def _request(self, request):
        _write_message(self._requests, request)
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
