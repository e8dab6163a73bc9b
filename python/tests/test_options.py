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

    def env(self, **extra):
        token = os.path.join(self.dir.name, "token")
        with open(token, "w") as f:
            f.write("from-file\n")
        e = {"GAPTRAIN_JOB": self.job, "GAPTRAIN_ROLE": "trainer",
             "GAPTRAIN_COORDINATOR": "coord:7071", "GAPTRAIN_TOKEN_FILE": token,
             "GAPTRAIN_HTTP_PORT": "0", "GAPTRAIN_HOST_NAME": "pod-7",
             "GAPTRAIN_GRACE_SECONDS": "12.5", "GAPTRAIN_TOKEN": "from-env", "HOSTNAME": "h"}
        e.update(extra)
        return e

    def test_settings_from_the_environment(self):
        # The operator starts a user's command as given: no flags at all.
        o = options.parse([], environ=self.env())
        self.assertEqual((o.job_file, o.coordinator, o.token, o.http_port, o.host_name,
                          o.grace_seconds, o.role),
                         (self.job, "coord:7071", "from-file", 0, "pod-7", 12.5, "trainer"))
        self.assertEqual((o.job_name, o.wire_type), ("j", pb.BFLOAT16))

    def test_the_job_certificate_from_the_environment(self):
        # In a cluster the operator names the job's own certificate (TLS).
        o = options.parse([], environ=self.env(GAPTRAIN_COORDINATOR_CA="/tls/ca.crt",
                                               GAPTRAIN_MASTER_CA="/tls/ca.crt"))
        self.assertEqual((o.coordinator_ca, o.master_ca), ("/tls/ca.crt", "/tls/ca.crt"))
        o = options.parse(["--master-ca", "/mine.pem"],
                          environ=self.env(GAPTRAIN_MASTER_CA="/tls/ca.crt"))
        self.assertEqual((o.coordinator_ca, o.master_ca), ("", "/mine.pem"))

    def test_flags_win_over_the_environment(self):
        other = os.path.join(self.dir.name, "other.yaml")
        with open(other, "w") as f:
            f.write("metadata: {name: other}\nspec: {}\n")
        o = options.parse(["--job", other, "--coordinator", "c:1", "--http-port", "9100",
                           "--host-name", "flag-host", "--grace-seconds", "3"],
                          environ=self.env())
        self.assertEqual((o.job_name, o.coordinator, o.http_port, o.host_name, o.grace_seconds),
                         ("other", "c:1", 9100, "flag-host", 3.0))

    def test_defaults_without_the_environment(self):
        o = options.parse(["--job", self.job, "--coordinator", "c:1"],
                          environ={"GAPTRAIN_TOKEN": "t"})
        self.assertEqual((o.http_port, o.http_address, o.ports_file, o.role),
                         (9092, "0.0.0.0", "", "trainer"))

    def test_bad_environment_values_are_named(self):
        for var, value in [("GAPTRAIN_HTTP_PORT", "http"), ("GAPTRAIN_HTTP_PORT", "70000"),
                           ("GAPTRAIN_HTTP_PORT", "-1"), ("GAPTRAIN_GRACE_SECONDS", "soon"),
                           ("GAPTRAIN_GRACE_SECONDS", "0"), ("GAPTRAIN_GRACE_SECONDS", "nan"),
                           ("GAPTRAIN_COORDINATOR", "no-port"), ("GAPTRAIN_ROLE", "judge"),
                           ("GAPTRAIN_TOKEN_FILE", "/nonexistent/token"),
                           ("GAPTRAIN_JOB", "/nonexistent/job.yaml")]:
            with self.assertRaises(options.OptionsError, msg=var + "=" + value) as e:
                options.parse([], environ=self.env(**{var: value}))
            self.assertIn("$" + var, str(e.exception))
            self.assertIn(value, str(e.exception))

    def test_a_role_other_than_the_callers_is_a_clear_error(self):
        for argv, env, name in [([], {"GAPTRAIN_ROLE": "evaluator"}, "$GAPTRAIN_ROLE"),
                                (["--role", "evaluator"], {}, "--role")]:
            with self.assertRaises(options.OptionsError) as e:
                options.parse(argv, environ=self.env(**env))
            self.assertIn(name, str(e.exception))
            self.assertIn("call gaptrain.evaluate()", str(e.exception))
            self.assertEqual(options.requested_role(argv, self.env(**env)), "evaluator")
            o = options.parse(argv, environ=self.env(**env), role="evaluator")
            self.assertEqual(o.role, "evaluator")
        with self.assertRaises(options.OptionsError) as e:
            options.parse([], environ=self.env(), role="evaluator")  # $GAPTRAIN_ROLE=trainer
        self.assertIn("call gaptrain.train()", str(e.exception))
        with self.assertRaises(options.OptionsError) as e:
            options.parse(["--role", "master"], environ=self.env())
        self.assertIn("'master' is not trainer or evaluator", str(e.exception))
        self.assertEqual(options.requested_role([], {}), "trainer")

    def test_the_evaluation_period_and_batch_from_the_job(self):
        with open(self.job, "w") as f:
            f.write("spec: {training: {evalEveryUpdates: 250, batchSize: 32}}\n")
        o = options.parse([], environ=self.env())
        self.assertEqual((o.eval_every_updates, o.batch_size), (250, 32))
        with open(self.job, "w") as f:
            f.write("spec: {training: {evalEveryUpdates: 0}}\n")
        with self.assertRaises(options.OptionsError) as e:
            options.parse([], environ=self.env())
        self.assertIn("spec.training.evalEveryUpdates", str(e.exception))

    def test_the_target_metric_from_the_job(self):
        for spec, metric in [("{}", ""), ("{targetAccuracy: 0.9}", "accuracy"),
                             ("{target: {metric: top5_accuracy, atLeast: 0.9}}",
                              "top5_accuracy"),
                             ("{target: {metric: perplexity, atMost: 20}}", "perplexity")]:
            with open(self.job, "w") as f:
                f.write("spec: {training: %s}\n" % spec)
            self.assertEqual(options.parse([], environ=self.env()).target_metric, metric, spec)

    def test_the_data_path_from_the_job_or_data_dir(self):
        with open(self.job, "w") as f:
            f.write("spec: {data: {format: mnist-idx, path: /data/fashion}, "
                    "model: {torchscript: m.pt}}\n")
        o = options.parse([], environ=self.env())
        self.assertEqual((o.data_path, o.data_format, o.model),
                         ("/data/fashion", "mnist-idx", {"torchscript": "m.pt"}))
        o = options.parse(["--data-dir", "/elsewhere"], environ=self.env())
        self.assertEqual(o.data_path, "/elsewhere")

    def test_defaults_from_an_empty_job(self):
        with open(self.job, "w") as f:
            f.write("spec: {}\n")
        o = options.parse(["--job", self.job, "--coordinator", "c:1", "--insecure-no-token"],
                          environ={})
        self.assertEqual((o.wire_type, o.mode, o.rule), (pb.FLOAT32, "async", "gap-aware"))
        self.assertEqual((o.momentum, o.weight_decay), (0.9, 1e-4))  # the C++ defaults

    def test_dana_slims_momentum_and_weight_decay_from_the_job(self):
        args = ["--job", self.job, "--coordinator", "c:1", "--insecure-no-token"]
        with open(self.job, "w") as f:
            f.write("spec: {training: {optimizer: {momentum: 0.5, weightDecay: 0}}}\n")
        o = options.parse(args, environ={})
        self.assertEqual((o.momentum, o.weight_decay), (0.5, 0.0))
        for optimizer, message in [
                ("{momentum: 1.0}", "spec.training.optimizer.momentum: must be a number in "
                                    "[0, 1), got 1.0"),
                ("{momentum: fast}", "spec.training.optimizer.momentum: must be a number in "
                                     "[0, 1), got 'fast'"),
                ("{weightDecay: -1}", "spec.training.optimizer.weightDecay: must be a number "
                                      "at least 0, got -1")]:
            with open(self.job, "w") as f:
                f.write("spec: {training: {optimizer: %s}}\n" % optimizer)
            with self.assertRaises(options.OptionsError) as e:
                options.parse(args, environ={})
            self.assertEqual(str(e.exception), message)


if __name__ == "__main__":
    unittest.main()
