"""set_compute_threads (gaptrain/compute_threads.py): torch's threads and
OpenBLAS's pool, where the process has one, follow `--threads`."""

import os
import subprocess
import sys
import unittest

import torch

from gaptrain import compute_threads

HERE = os.path.dirname(os.path.realpath(__file__))


def torch_blas():
    """'generic' for Debian's python3-torch (libblas.so.3: OpenBLAS), 'mkl'
    for PyPI's."""
    config = torch.__config__.show()
    return config.split("BLAS_INFO=", 1)[1].split(",", 1)[0] if "BLAS_INFO=" in config else ""


class ComputeThreadsTest(unittest.TestCase):
    def setUp(self):
        self.addCleanup(torch.set_num_threads, torch.get_num_threads())

    def test_torch_threads_follow(self):
        compute_threads.set_compute_threads(1)
        self.assertEqual(torch.get_num_threads(), 1)
        compute_threads.set_compute_threads(0)  # at least one
        self.assertEqual(torch.get_num_threads(), 1)

    def test_openblas_pool_follows(self):
        lib = compute_threads.openblas()
        if lib is None:
            # PyPI's torch computes with MKL, which torch's own count sizes
            # (numpy's bundled OpenBLAS has other names and is not torch's).
            self.assertEqual(torch_blas(), "mkl")
            return
        self.assertEqual(torch_blas(), "generic")  # Debian's: libblas.so.3, OpenBLAS
        self.addCleanup(lib.openblas_set_num_threads, lib.openblas_get_num_threads())
        compute_threads.set_compute_threads(2)
        self.assertEqual(lib.openblas_get_num_threads(), 2)
        compute_threads.set_compute_threads(1)
        self.assertEqual(lib.openblas_get_num_threads(), 1)
        # It still computes, on one thread.
        a = torch.arange(256 * 256, dtype=torch.float32).reshape(256, 256) / 1e4
        self.assertTrue(torch.allclose(a @ a, (a.double() @ a.double()).float(), rtol=1e-5))

    def test_a_started_pool_shrinks(self):
        # A process started without OPENBLAS_NUM_THREADS has one thread per
        # CPU in its pool; set_compute_threads(1) leaves one.
        # OpenBLAS sizes its pool from the first of these that is set.
        unset = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
        env = {k: v for k, v in os.environ.items() if k not in unset}
        env["PYTHONPATH"] = os.path.join(HERE, "..")
        code = ("from gaptrain import compute_threads as c\n"
                "lib = c.openblas()\n"
                "before = lib.openblas_get_num_threads() if lib else 0\n"
                "c.set_compute_threads(1)\n"
                "after = lib.openblas_get_num_threads() if lib else 0\n"
                "print(before, after, int(lib is not None))\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout.split()
        before, after, found = map(int, out)
        if found:
            if os.cpu_count() > 1:
                self.assertGreater(before, 1)  # a pool nobody asked for
            self.assertEqual(after, 1)
        else:
            self.assertEqual((before, after), (0, 0))


if __name__ == "__main__":
    unittest.main()
