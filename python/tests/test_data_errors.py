"""Which dataset errors mean that the data's store is away for a while
(gaptrain/data_errors.py): a trainer reads such a batch again; any other
error still ends the trainer."""

import errno
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gaptrain.data_errors import store_unavailable  # noqa: E402


class EndpointConnectionError(Exception):
    """Named as botocore's: matched by class name, botocore not imported."""


class ReadTimeoutError(EndpointConnectionError):
    pass


class StoreUnavailableTest(unittest.TestCase):
    def test_a_store_that_is_away(self):
        for error in [ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
                      ConnectionResetError(), TimeoutError("read timed out"),
                      OSError(errno.EHOSTUNREACH, "no route"),
                      OSError(errno.ESTALE, "stale NFS file handle"),
                      EndpointConnectionError("http://store:9000"), ReadTimeoutError()]:
            self.assertTrue(store_unavailable(error), repr(error))

    def test_data_or_code_that_is_wrong(self):
        for error in [FileNotFoundError(errno.ENOENT, "no such file"),
                      PermissionError(errno.EACCES, "denied"), OSError("no errno"),
                      ValueError("bad image"), IndexError(3), KeyError("label"),
                      RuntimeError("a batch that cannot be pickled")]:
            self.assertFalse(store_unavailable(error), repr(error))


if __name__ == "__main__":
    unittest.main()
