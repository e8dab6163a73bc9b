"""gaptrain-worker's heap policy (services/base/heap_policy.cc) for the
trainer's process: glibc keeps freed memory instead of handing it back to
the kernel after every step.

Each step allocates and frees megabyte-sized blocks (the batch, the
activations, the gradient and its wire bytes, gRPC's receive buffers). With
glibc's defaults many of them are mmap'd and unmapped, or trimmed off the
heap, and the next step faults the pages in again: in a bare PushPull loop
against the master this was more than half of the call's time (5.4 ms a call
before, 2.2 ms after, on the 2-core development machine)."""

import ctypes
import ctypes.util
import logging

log = logging.getLogger("gaptrain")

# glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3


def use_training_heap_policy():
    """As UseTrainingHeapPolicy: all three together (setting any of them
    freezes glibc's adaptive mmap threshold). True when applied; False
    where the C library has no mallopt (not glibc)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.debug("no mallopt in this C library: heap policy left alone")
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = mallopt(_M_MMAP_THRESHOLD, 256 << 20)
    ok &= mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    ok &= mallopt(_M_TOP_PAD, 64 << 20)
    return bool(ok)
