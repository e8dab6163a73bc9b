"""set_compute_threads: a trainer's or evaluator's `--threads` for every
math library's pool in the process, as gaptrain-worker's SetComputeThreads
(services/learn/compute_threads.h).

torch.set_num_threads sizes LibTorch's own pool (OpenMP, MKL) but not
OpenBLAS's, which Debian's python3-torch computes with
(libopenblas0-pthread): that pool keeps one thread per CPU whatever torch
was told, and its threads spin between calls. On the 2-CPU development
machine a plain loop told torch.set_num_threads(1) spent 9.0 ms of CPU a
step in 4.5 ms (bench/python_trainer_bench.py): a second CPU taken from
the batch process and the master. gaptrain's launcher and image start
trainers with OPENBLAS_NUM_THREADS=1 (services/base/blas_environment.h);
a process started otherwise has its pool resized here, through the loaded
library's openblas_set_num_threads. torch loads it privately (not
reachable by symbol from the process), so it is found in /proc/self/maps
and opened without loading anything (RTLD_NOLOAD)."""

import ctypes
import functools
import logging
import os

import torch

log = logging.getLogger("gaptrain")


@functools.lru_cache(maxsize=1)
def openblas():
    """The OpenBLAS library this process has loaded (a ctypes.CDLL with
    openblas_set_num_threads and openblas_get_num_threads), or None. A
    copy bundled under other names (numpy's scipy_openblas) is not
    torch's and is left alone."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[5].strip() for line in f
                     if line.count(" ") >= 5 and "openblas" in line}
    except OSError:  # not Linux
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            continue
        if hasattr(lib, "openblas_set_num_threads") and hasattr(lib, "openblas_get_num_threads"):
            lib.openblas_set_num_threads.argtypes = [ctypes.c_int]
            lib.openblas_get_num_threads.restype = ctypes.c_int
            return lib
    return None


def set_compute_threads(threads):
    """torch's intra-op threads and, where the process computes with
    OpenBLAS, its pool's, to `threads` (>= 1)."""
    threads = max(1, int(threads))
    torch.set_num_threads(threads)
    lib = openblas()
    if lib is not None:
        lib.openblas_set_num_threads(threads)
        log.debug("OpenBLAS threads: %d", threads)
