"""Which dataset errors mean that the data's store is away for a while
(gaptrain/data_errors.py): a trainer hands its task back; any other error
still ends the trainer. What it tells the coordinator of the error
(coordinator_client.release_message): one line of at most 1024 bytes. What
the trainer does with the coordinator's answer (Trainer._hand_back, on a
fake session): the task handed back and forgotten, kept and read again
against a coordinator without ReleaseTask, refusals that are not about the
data raised. test_integration.py runs it against the real coordinator."""

import errno
import os
import sys
import tempfile
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gaptrain import options, rpc  # noqa: E402
from gaptrain._proto import gaptrain_pb2 as pb  # noqa: E402
from gaptrain.coordinator_client import release_message  # noqa: E402
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


class ReleaseMessageTest(unittest.TestCase):
    def test_one_printable_line_as_the_coordinator_takes_it(self):
        self.assertEqual(release_message("ConnectionRefusedError: [Errno 111] refused"),
                         "ConnectionRefusedError: [Errno 111] refused")
        self.assertEqual(release_message("a\nb\tc\x7fd\x00"), "a b c d ")
        self.assertEqual(release_message("caf\u00e9"), "caf\u00e9")
        self.assertEqual(release_message("bad \udcff byte"), "bad ? byte")

    def test_cut_to_1024_bytes_on_a_character_boundary(self):
        cut = release_message("\u00e9" * 600)  # 1200 bytes of UTF-8
        self.assertEqual(cut, "\u00e9" * 512)
        self.assertEqual(len(cut.encode("utf-8")), 1024)
        self.assertEqual(len(release_message("x" * 5000)), 1024)



class FakeSession:
    """release_task as the coordinator answers it: None, or an rpc.Error."""

    def __init__(self, answer=None):
        self.answer, self.releases, self.progress = answer, [], None

    def release_task(self, task_id, message):
        self.releases.append((task_id, message))
        if self.answer is not None:
            raise self.answer

    def set_progress(self, task_id, samples_done, loss=None):
        self.progress = (task_id, samples_done)


class HandBackTest(unittest.TestCase):
    def setUp(self):
        import torch
        from gaptrain.trainer import Trainer
        self.dir = tempfile.TemporaryDirectory()
        job = os.path.join(self.dir.name, "job.yaml")
        with open(job, "w") as f:
            f.write("metadata: {name: j}\nspec: {}\n")
        opts = options.parse(["--job", job, "--coordinator", "c:1", "--host-name", "h"],
                             environ={"GAPTRAIN_TOKEN": "t"})
        self.trainer = Trainer(torch.nn.Linear(2, 2), [], options=opts, handle_signals=False,
                               heap_policy=False)
        self.trainer._data_backoff = rpc.Backoff("h", initial=0.001, cap=0.002)
        self.task = pb.DataTask(task_id=9, epoch=0, begin=512, end=576)
        self.trainer._task, self.trainer._task_done = self.task, 32
        self.error = ConnectionRefusedError(111, "store:9000 refused the connection")

    def tearDown(self):
        self.dir.cleanup()

    def test_the_task_is_handed_back_and_forgotten(self):
        session = self.trainer.session = FakeSession()
        with self.assertLogs("gaptrain", level="WARNING") as logs:
            self.assertFalse(self.trainer._hand_back(self.task, 544, self.error))
        self.assertEqual(session.releases, [
            (9, "ConnectionRefusedError: [Errno 111] store:9000 refused the connection")])
        self.assertEqual((self.trainer._task, self.trainer._task_done), (None, 0))
        self.assertEqual(session.progress, (0, 0))  # heartbeats stop reporting it
        self.assertIn("task 9 (epoch 0, positions [512, 576)) handed back to the coordinator at "
                      "position 544", logs.output[0])

    def test_a_task_the_coordinator_took_back_already_counts_as_handed_back(self):
        self.trainer.session = FakeSession(rpc.Error(grpc.StatusCode.FAILED_PRECONDITION,
                                                     "worker 1 does not hold task 9"))
        with self.assertLogs("gaptrain", level="WARNING"):
            self.assertFalse(self.trainer._hand_back(self.task, 544, self.error))
        self.assertIsNone(self.trainer._task)

    def test_a_coordinator_without_release_task_keeps_the_task(self):
        session = self.trainer.session = FakeSession(
            rpc.Error(grpc.StatusCode.UNIMPLEMENTED, "unknown method ReleaseTask"))
        with self.assertLogs("gaptrain", level="WARNING") as logs:
            self.assertTrue(self.trainer._hand_back(self.task, 544, self.error))
            self.assertTrue(self.trainer._hand_back(self.task, 544, self.error))
        self.assertEqual(len(session.releases), 1)  # not asked again
        self.assertIs(self.trainer._task, self.task)
        self.assertIn("is read again in", logs.output[-1])

    def test_other_refusals_are_raised(self):
        self.trainer.session = FakeSession(rpc.Error(grpc.StatusCode.INVALID_ARGUMENT,
                                                     "message: at most 1024 bytes"))
        with self.assertRaises(rpc.Error):
            self.trainer._hand_back(self.task, 544, self.error)


if __name__ == "__main__":
    unittest.main()
