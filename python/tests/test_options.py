"""Flags and environment, as gaptrain-worker's."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gaptrain import options  # noqa: E402
from gaptrain._proto import gaptrain_pb2 as pb  # noqa: E402


class OptionsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.job = os.path.join(self.dir.name, "job.yaml")
        with open(self.job, "w") as f:
            f.write("metadata: {name: j}\nspec:\n  training: {wireType: bf16, "
                    "staleness: {rule: gap-aware-dana}}\n")

    def tearDown(self):
        self.dir.cleanup()

    def test_the_operators_command_line(self):
        token = os.path.join(self.dir.name, "token")
        with open(token, "w") as f:
            f.write("abc\n")
        o = options.parse(["--job", self.job, "--role", "trainer", "--coordinator", "c:7071",
                           "--token-file", token, "--http-port", "9092", "--host-name", "pod-1",
                           "--grace-seconds", "25", "--user-flag", "x"], environ={})
        self.assertEqual((o.coordinator, o.token, o.host_name, o.grace_seconds),
                         ("c:7071", "abc", "pod-1", 25.0))
        self.assertEqual((o.job_name, o.wire_type, o.rule), ("j", pb.BFLOAT16, "gap-aware-dana"))

    def test_token_and_host_from_the_environment(self):
        o = options.parse(["--job", self.job, "--coordinator", "c:1"],
                          environ={"GAPTRAIN_TOKEN": "t", "HOSTNAME": "h"})
        self.assertEqual((o.token, o.host_name, o.grace_seconds), ("t", "h", 20.0))

    def test_bad_flags_are_named(self):
        for argv, flag in [([], "--job"), (["--job", self.job], "--coordinator"),
                           (["--job", self.job, "--coordinator", "c:1"], "--token-file"),
                           (["--job", self.job, "--coordinator", "c:1", "--insecure-no-token",
                             "--role", "evaluator"], "--role"),
                           (["--job", "/nonexistent", "--coordinator", "c:1",
                             "--insecure-no-token"], "--job")]:
            with self.assertRaises(options.OptionsError) as e:
                options.parse(argv, environ={})
            self.assertIn(flag, str(e.exception))

    def test_defaults_from_an_empty_job(self):
        with open(self.job, "w") as f:
            f.write("spec: {}\n")
        o = options.parse(["--job", self.job, "--coordinator", "c:1", "--insecure-no-token"],
                          environ={})
        self.assertEqual((o.wire_type, o.mode, o.rule), (pb.FLOAT32, "async", "gap-aware"))


if __name__ == "__main__":
    unittest.main()
