"""A Python trainer against the real C++ master and coordinator on loopback:
it trains the Fashion-MNIST MLP of examples/fashion_mnist_mlp.py (the job's
model is `builtin: mlp`, whose flat layout that module has), is preempted
with SIGTERM mid-task and leaves within its grace period, and a second one
finishes the job.

Binaries: $GAPTRAIN_MASTER_BIN and $GAPTRAIN_COORDINATOR_BIN, else the
checkout's bazel-bin (bazel build //services/master:gaptrain-master
//services/coordinator:gaptrain-coordinator). Data: $GAPTRAIN_DATA_DIR,
else ../shared/data next to the checkout. Missing binaries or data fail the
test, never skip it."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.abspath(os.path.join(HERE, ".."))
REPO = os.path.abspath(os.path.join(PYTHON_DIR, ".."))
sys.path.insert(0, PYTHON_DIR)

import grpc  # noqa: E402

from gaptrain._proto import gaptrain_pb2 as pb  # noqa: E402
from gaptrain._proto import gaptrain_pb2_grpc as pb_grpc  # noqa: E402

TOKEN = "0123456789abcdef0123456789abcdef"
EXAMPLE = os.path.join(PYTHON_DIR, "examples", "fashion_mnist_mlp.py")
USER_EXAMPLE = os.path.join(REPO, "examples", "python")

# gaptrain-worker's metrics a Python trainer serves (docs/metrics.md, "Worker").
WORKER_METRICS = {
    "gaptrain_worker_step_duration_seconds": "histogram",
    "gaptrain_worker_samples_total": "counter",
    "gaptrain_worker_samples_per_second": "gauge",
    "gaptrain_worker_loss": "gauge",
    "gaptrain_worker_reconnects_total": "counter",
    "gaptrain_worker_pushes_rejected_total": "counter",
    "gaptrain_worker_master_version": "gauge",
    "gaptrain_worker_device_info": "gauge",
    "gaptrain_worker_eval_accuracy": "gauge",
    "gaptrain_worker_eval_loss": "gauge",
    "gaptrain_worker_eval_version": "gauge",
    "gaptrain_worker_eval_duration_seconds": "histogram",
}


def http_get(port, path):
    """(status, body) of GET http://127.0.0.1:PORT/PATH."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port):
    """{series: value} and {name: type} of a /metrics page."""
    status, body = http_get(port, "/metrics")
    assert status == 200, (status, body)
    series, types = {}, {}
    for line in body.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        elif line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            series[key] = float(value)
    return series, types


def wait_for_port(path, process, log, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("the trainer exited with %d: %s" % (process.returncode, log()))
        try:
            with open(path) as f:
                words = f.read().split()
            if words:
                return int(words[0])
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("no ports file %s within %d s" % (path, timeout))


def binary(env, relative):
    path = os.environ.get(env) or os.path.join(REPO, "bazel-bin", relative)
    if not os.access(path, os.X_OK):
        raise AssertionError("%s not found (build it, or set $%s)" % (path, env))
    return path


def data_dir():
    d = os.path.join(os.environ.get("GAPTRAIN_DATA_DIR") or os.path.join(REPO, "..", "shared",
                                                                         "data"),
                     "fashion-mnist")
    if not os.path.exists(os.path.join(d, "train-images-idx3-ubyte.gz")):
        raise AssertionError("Fashion-MNIST not found in %s (set $GAPTRAIN_DATA_DIR)" % d)
    return os.path.abspath(d)


JOB = """apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: python-sdk-{wire}
spec:
  model: {model}
  data: {data_spec}
  training:
    batchSize: 32
    {length}
    evalEveryUpdates: {eval_every}{target}
    wireType: {wire}
    mode: {mode}
    optimizer:
      learningRate: 0.05
      momentum: 0.9
      weightDecay: 1.0e-4
      decay: {{type: none}}
    staleness: {{rule: {rule}, gapSource: {gap_source}}}
  workers: {{replicas: {trainers}, minReplicas: {trainers}}}
  master:
    checkpoint: {{intervalSeconds: 3600, keep: 2, path: {run}/checkpoints}}{shards}
  coordinator: {{leaseSeconds: 3}}
"""


class Job:
    """The master (with `shards` > 1, one per shard: master-I) and the
    coordinator of one job, as cli/run/local_job.cc starts them."""

    def __init__(self, run_dir, wire, updates, gap_source="snapshot", model="{builtin: mlp}",
                 mode="async", rule="gap-aware", trainers=1, eval_every=100000,
                 target_accuracy=None, target=None, data_spec=None, epochs=None, shards=1):
        self.run = run_dir
        self.job = os.path.join(run_dir, "job.yaml")
        with open(self.job, "w") as f:
            f.write(JOB.format(wire=wire, run=run_dir,
                               length=("epochs: %g" % epochs) if epochs else
                               "maxUpdates: %d" % updates,
                               data_spec=data_spec or "{format: mnist-idx, path: %s, "
                                                      "shuffleSeed: 3}" % data_dir(),
                               gap_source=gap_source, model=model, mode=mode, rule=rule,
                               trainers=trainers, eval_every=eval_every,
                               shards="\n    shards: %d" % shards if shards > 1 else "",
                               target=("\n    target: %s" % target) if target else
                               "" if target_accuracy is None else
                               "\n    targetAccuracy: %g" % target_accuracy))
        self.env = dict(os.environ, GAPTRAIN_TOKEN=TOKEN)
        self.processes = []
        self.masters = []  # shard i's address at i
        for i in range(shards):
            port = self._start("master" if shards == 1 else "master-%d" % i, binary(
                "GAPTRAIN_MASTER_BIN", "services/master/gaptrain-master"),
                ["--checkpoint-dir", os.path.join(run_dir, "checkpoints")] +
                (["--shard", str(i)] if shards > 1 else []))
            self.masters.append("127.0.0.1:%d" % port)
        self.master = self.masters[0]
        coordinator_port = self._start("coordinator", binary(
            "GAPTRAIN_COORDINATOR_BIN", "services/coordinator/gaptrain-coordinator"),
            ["--state-dir", os.path.join(run_dir, "coordinator"), "--master",
             ",".join(self.masters), "--task-batches", "20"])
        self.coordinator = "127.0.0.1:%d" % coordinator_port
        self.http_port = self.ports("coordinator")[1]  # /status, /metrics
        md = (("authorization", "Bearer " + TOKEN),)
        self._channels = [grpc.insecure_channel(a) for a in [self.coordinator] + self.masters]
        self._coordinator = pb_grpc.CoordinatorStub(self._channels[0])
        self.master_stubs = [pb_grpc.MasterStub(c) for c in self._channels[1:]]
        self._master = self.master_stubs[0]
        self._md = md

    def _start(self, name, path, args, listen="127.0.0.1:0"):
        ports = os.path.join(self.run, name + ".ports")
        if os.path.exists(ports):
            os.remove(ports)
        with open(os.path.join(self.run, name + ".log"), "a") as log:
            p = subprocess.Popen([path, "--job", self.job, "--listen", listen,
                                  "--http-address", "127.0.0.1", "--http-port", "0",
                                  "--ports-file", ports] + args,
                                 env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(p)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if p.poll() is not None:
                raise AssertionError("%s exited with %d: %s" % (name, p.returncode,
                                                                self.log(name)))
            try:
                with open(ports) as f:
                    words = f.read().split()
                if len(words) >= 2:
                    return int(words[0])
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("%s did not start within 60 s" % name)

    def restart_master_shard(self, i):
        """SIGKILLs master-I (of a job with shards) and starts it again on
        its address, as a pod's restart does (self.processes holds
        master-0 .. master-(S-1) first)."""
        self.processes[i].kill()
        self.processes[i].wait()
        self._start("master-%d" % i, binary("GAPTRAIN_MASTER_BIN",
                                            "services/master/gaptrain-master"),
                    ["--checkpoint-dir", os.path.join(self.run, "checkpoints"), "--shard",
                     str(i)], listen=self.masters[i])
        self.processes[i] = self.processes.pop()

    def ports(self, name):
        """NAME's (gRPC port, HTTP port) from its ports file."""
        with open(os.path.join(self.run, name + ".ports")) as f:
            return tuple(int(w) for w in f.read().split()[:2])

    def log(self, name, tail=3000):
        """The end of NAME.log (all of it with tail=None)."""
        with open(os.path.join(self.run, name + ".log")) as f:
            text = f.read()
        return text if tail is None else text[-tail:]

    def trainer(self, name, grace=5, model="mlp", role="trainer", extra=()):
        """python/examples/fashion_mnist_mlp.py started with gaptrain-worker's
        flags; the trainer's HTTP port is in self.run/NAME.ports."""
        result = os.path.join(self.run, name + ".json")
        env = dict(self.env, PYTHONPATH=PYTHON_DIR)
        with open(os.path.join(self.run, name + ".log"), "w") as log:
            p = subprocess.Popen([sys.executable, EXAMPLE, "--data", data_dir(), "--result",
                                  result, "--job", self.job, "--coordinator", self.coordinator,
                                  "--host-name", name, "--grace-seconds", str(grace),
                                  "--threads", "1", "--model", model, "--role", role,
                                  "--http-address",
                                  "127.0.0.1", "--http-port", "0", "--ports-file",
                                  os.path.join(self.run, name + ".ports")] + list(extra),
                                 env=env, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(p)
        return p, result

    def user_trainer(self, name):
        """examples/python/train.py as the operator starts a user's command:
        no flags, every setting in the environment."""
        result = os.path.join(self.run, name + ".json")
        token_file = os.path.join(self.run, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        env = {k: v for k, v in self.env.items() if k != "GAPTRAIN_TOKEN"}
        env.update(PYTHONPATH=PYTHON_DIR, GAPTRAIN_JOB=self.job, GAPTRAIN_ROLE="trainer",
                   GAPTRAIN_COORDINATOR=self.coordinator, GAPTRAIN_TOKEN_FILE=token_file,
                   GAPTRAIN_HTTP_PORT="0", GAPTRAIN_HOST_NAME=name,
                   GAPTRAIN_GRACE_SECONDS="5",
                   GAPTRAIN_PORTS_FILE=os.path.join(self.run, name + ".ports"),
                   OMP_NUM_THREADS="1")
        with open(os.path.join(self.run, name + ".log"), "w") as log:
            p = subprocess.Popen([sys.executable, os.path.join(USER_EXAMPLE, "train.py"),
                                  "--result", result], cwd=self.run, env=env, stdout=log,
                                 stderr=subprocess.STDOUT)
        self.processes.append(p)
        return p, result

    def _call(self, method, request):
        # A connection the server closed while idle fails one call
        # (UNAVAILABLE, "Socket closed"); the next one reconnects. A master
        # that starts serving a declared model cancels the calls in flight.
        for attempt in range(20):
            try:
                return method(request, timeout=5, metadata=self._md)
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.UNAVAILABLE,
                                    grpc.StatusCode.CANCELLED) or attempt == 19:
                    raise
                time.sleep(0.25)

    def status(self):
        return self._call(self._coordinator.Status, pb.CoordinatorStatusRequest())

    def master_version(self):
        return self._call(self._master.Describe, pb.DescribeRequest()).version

    def close(self):
        for c in getattr(self, "_channels", []):
            c.close()
        for p in reversed(self.processes):
            if p.poll() is None:
                p.kill()
                p.wait()


def read_result(path):
    with open(path) as f:
        return json.load(f)


def mean(xs):
    return sum(xs) / len(xs)


class PythonTrainerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gaptrain-python-")

    def tearDown(self):
        self.dir.cleanup()

    def train_to_the_end(self, job, name, **trainer_args):
        """Runs trainer `name` (job.trainer's arguments) to its end; its
        result, once it finished with no batch skipped and the job
        succeeded."""
        trainer, result = job.trainer(name, **trainer_args)
        self.assertEqual(trainer.wait(timeout=240), 0, job.log(name))
        r = read_result(result)
        self.assertEqual((r["reason"], r["skipped"]), ("finished", 0))
        self.assertEqual(job.status().phase, pb.JOB_PHASE_SUCCEEDED)
        return r

    def test_trains_is_preempted_and_a_second_trainer_finishes(self):
        job = Job(self.dir.name, "fp32", updates=300)
        try:
            first, first_result = job.trainer("py-trainer-1")
            deadline = time.monotonic() + 120
            while job.master_version() < 70:  # mid-task (tasks of 20 batches)
                self.assertIsNone(first.poll(), job.log("py-trainer-1"))
                self.assertLess(time.monotonic(), deadline, job.log("py-trainer-1"))
                time.sleep(0.05)
            self.assertGreater(job.status().tasks_done, 0, "20-batch tasks completed by now")
            port = wait_for_port(os.path.join(self.dir.name, "py-trainer-1.ports"), first,
                                 lambda: job.log("py-trainer-1"))
            self.assertEqual(http_get(port, "/healthz"), (200, "ok"))
            self.assertEqual(http_get(port, "/nothing")[0], 404)
            before, types = scrape(port)
            for name, kind in WORKER_METRICS.items():
                self.assertEqual(types.get(name), kind, name)
            self.assertEqual(before['gaptrain_worker_device_info{device="cpu"}'], 1)
            self.assertGreater(before["gaptrain_worker_samples_total"], 0)
            self.assertGreater(before["gaptrain_worker_master_version"], 0)
            for phase in ("pull", "compute", "push"):
                self.assertGreater(before['gaptrain_worker_step_duration_seconds_count'
                                          '{phase="%s"}' % phase], 0, phase)
            self.assertEqual(before['gaptrain_worker_step_duration_seconds_bucket'
                                    '{phase="compute",le="+Inf"}'],
                             before['gaptrain_worker_step_duration_seconds_count'
                                    '{phase="compute"}'])
            self.assertIn('gaptrain_worker_reconnects_total{service="master"}', before)
            time.sleep(0.5)
            after, _ = scrape(port)
            self.assertGreater(after["gaptrain_worker_samples_total"],
                               before["gaptrain_worker_samples_total"])
            self.assertGreater(after['gaptrain_worker_step_duration_seconds_count'
                                     '{phase="push"}'],
                               before['gaptrain_worker_step_duration_seconds_count'
                                      '{phase="push"}'])
            self.assertGreaterEqual(after["gaptrain_worker_master_version"],
                                    before["gaptrain_worker_master_version"])
            signalled = time.monotonic()
            first.send_signal(signal.SIGTERM)
            self.assertEqual(first.wait(timeout=10), 0, job.log("py-trainer-1"))
            left_after = time.monotonic() - signalled
            self.assertLess(left_after, 5.0, "left within its 5 s grace period")
            r1 = read_result(first_result)
            self.assertEqual(r1["reason"], "preempted")
            status = job.status()
            self.assertEqual(status.preempted, 1, status)
            self.assertEqual(status.failed, 0, status)
            # Its task in hand went back, unless the signal came between tasks.
            if r1["batches"] != 20 * r1["tasks"]:
                self.assertIn("handed back task", job.log("py-trainer-1"))

            second, second_result = job.trainer("py-trainer-2")
            self.assertEqual(second.wait(timeout=240), 0, job.log("py-trainer-2"))
            r2 = read_result(second_result)
            self.assertEqual(r2["reason"], "finished")
            status = job.status()
            self.assertEqual(status.phase, pb.JOB_PHASE_SUCCEEDED, status)
            self.assertEqual((status.failed, status.expired), (0, 0), status)
            self.assertGreaterEqual(job.master_version(), 300)
            self.assertGreaterEqual(r1["tasks"] + r2["tasks"], 10)
            self.assertGreaterEqual(r1["batches"] + r2["batches"], 300)
            first_losses, last_losses = r1["losses"][:20], r2["losses"][-20:]
            print("\nFIGURE python trainer: left %.2f s after SIGTERM; loss %.3f -> %.3f over "
                  "%d + %d pushes" % (left_after, mean(first_losses), mean(last_losses),
                                      r1["batches"], r2["batches"]), file=sys.stderr)
            self.assertLess(mean(last_losses), 0.6 * mean(first_losses))
        finally:
            job.close()

    def test_bf16_wire_with_echoes(self):
        job = Job(self.dir.name, "bf16", updates=200, gap_source="echo")
        try:
            r = self.train_to_the_end(job, "py-trainer-bf16")
            self.assertGreaterEqual(job.master_version(), 200)
            self.assertLess(mean(r["losses"][-20:]), 0.6 * mean(r["losses"][:20]))
        finally:
            job.close()

    def test_sync_mode_two_trainers_in_lockstep(self):
        # A step of the master takes one gradient of each live trainer: a
        # push that waits for the other's is ACCUMULATED, and its trainer
        # pulls until the step is out before computing again. Had it not
        # waited, its next push would be a second gradient for the same
        # step, refused (ALREADY_EXISTS) and skipped: no batch is skipped.
        job = Job(self.dir.name, "fp32", updates=300, mode="sync", trainers=2)
        try:
            runs = [job.trainer("py-sync-%d" % i) for i in range(2)]
            for i, (trainer, _) in enumerate(runs):
                self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-sync-%d" % i))
            results = [read_result(result) for _, result in runs]
            for r in results:
                self.assertEqual((r["reason"], r["skipped"]), ("finished", 0))
            self.assertEqual(job.status().phase, pb.JOB_PHASE_SUCCEEDED)
            # The version counts steps: none of more than two gradients, and
            # many of two. (In sync mode a trainer that got no task is no
            # member until it asks again, 0.1 s later while the job is
            # Pending: the other may take a few steps alone at the start.)
            version = job.master_version()
            pushed = sum(r["batches"] for r in results)
            # The master stops at maxUpdates; a trainer's push that arrives
            # after that is discarded (DISCARDED_FINISHED) and counted, and
            # makes it heartbeat at once and wait for the answer, which ends
            # the job: a few at most, however slow the answer.
            self.assertEqual(version, 300)
            self.assertLessEqual(pushed, 2 * version + 2 + 4)
            self.assertGreaterEqual(pushed, version + 50)
            self.assertIn("rule sync", job.log("py-sync-0", tail=None))
            # Trained: the trainer that started first began near ln 10.
            first = max(mean(r["losses"][:10]) for r in results)
            last = mean(results[0]["losses"][-10:] + results[1]["losses"][-10:])
            self.assertLess(last, 0.6 * first)
        finally:
            job.close()

    def test_dana_slim_keeps_momentum_on_the_trainer(self):
        job = Job(self.dir.name, "fp32", updates=200, rule="dana-slim")
        try:
            r = self.train_to_the_end(job, "py-slim")
            self.assertIn("DANA-Slim momentum on this trainer (momentum 0.9, weight decay 0.0001)",
                          job.log("py-slim", tail=None))
            self.assertLess(mean(r["losses"][-20:]), 0.6 * mean(r["losses"][:20]))
        finally:
            job.close()

    def test_a_python_evaluator_reports_and_ends_the_job_at_its_target(self):
        # The example as the job's evaluator (gaptrain.evaluate on the test
        # split): it reports every 50 updates, the coordinator ends the job
        # once the accuracy reaches targetAccuracy, and the final model is
        # evaluated once more.
        job = Job(self.dir.name, "fp32", updates=5000, eval_every=50, target_accuracy=0.7)
        try:
            evaluator, eval_result = job.trainer("py-evaluator", role="evaluator")
            trainer, result = job.trainer("py-trainer")
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-trainer"))
            self.assertEqual(evaluator.wait(timeout=60), 0, job.log("py-evaluator"))
            st = job.status()
            self.assertEqual(st.phase, pb.JOB_PHASE_SUCCEEDED)
            self.assertEqual(st.reason, "TargetAccuracyReached")
            # "accuracy 0.7123 at version 250 reached the target accuracy >= 0.7";
            # the final model's evaluation after it may score a little less.
            self.assertRegex(st.message, r"^accuracy [0-9.]+ at version [0-9]+ reached the "
                                         r"target accuracy >= 0.7$")
            self.assertGreaterEqual(float(st.message.split()[1]), 0.7)
            self.assertLess(job.master_version(), 5000)
            e = read_result(eval_result)
            self.assertGreaterEqual(e["evaluations"], 1)
            self.assertAlmostEqual(e["accuracy"], st.last_accuracy, places=9)
            self.assertEqual(e["version"], st.last_eval_version)
            # The final model, evaluated again after the one that reached
            # the target when trainers pushed meanwhile (their next call
            # tells them the job ended).
            reached = int(st.message.split(" at version ")[1].split()[0])
            self.assertGreaterEqual(e["version"], reached, st.message)
            log = job.log("py-evaluator", tail=None)
            self.assertIn("worker py-evaluator (evaluator)", log)
            self.assertIn("evaluation: version", log)
            self.assertEqual(read_result(result)["reason"], "finished")
        finally:
            job.close()

    def test_the_users_metric_is_the_jobs_target(self):
        # spec.training.target on a metric of the evaluator's eval_fn:
        # top-2 accuracy, reported beside accuracy and loss, ends the job.
        job = Job(self.dir.name, "fp32", updates=5000, eval_every=50,
                  target="{metric: top2_accuracy, atLeast: 0.85}")
        try:
            evaluator, eval_result = job.trainer("py-evaluator", role="evaluator",
                                                 extra=["--top-k", "2"])
            trainer, result = job.trainer("py-trainer")
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-trainer"))
            self.assertEqual(evaluator.wait(timeout=60), 0, job.log("py-evaluator"))
            st = job.status()
            self.assertEqual((st.phase, st.reason), (pb.JOB_PHASE_SUCCEEDED, "TargetReached"))
            self.assertEqual(st.target, "top2_accuracy >= 0.85")
            metrics = {m.name: m.value for m in st.last_eval_metrics}
            self.assertEqual(list(metrics), ["top2_accuracy"])
            self.assertGreaterEqual(metrics["top2_accuracy"], st.last_accuracy)
            # The evaluation that reached it (the final model's may score less).
            self.assertRegex(st.message, r"^top2_accuracy [0-9.]+ at version [0-9]+ reached "
                                         r"the target top2_accuracy >= 0.85$")
            self.assertGreaterEqual(float(st.message.split()[1]), 0.85)
            self.assertLess(job.master_version(), 5000)
            e = read_result(eval_result)
            self.assertAlmostEqual(e["metrics"]["top2_accuracy"], metrics["top2_accuracy"],
                                   places=9)
        finally:
            job.close()

    def test_an_evaluator_started_after_the_job_ended_scores_the_final_model(self):
        # A slow start (or a restart near the end) must not cost the job
        # its final evaluation: the coordinator lets an evaluator join a
        # finished job, and it evaluates the final model at once.
        job = Job(self.dir.name, "fp32", updates=60)
        try:
            trainer, _ = job.trainer("py-trainer")
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-trainer"))
            self.assertEqual(job.status().phase, pb.JOB_PHASE_SUCCEEDED)
            self.assertFalse(job.status().HasField("last_accuracy"))
            evaluator, eval_result = job.trainer("py-late-evaluator", role="evaluator")
            self.assertEqual(evaluator.wait(timeout=120), 0, job.log("py-late-evaluator"))
            st = job.status()
            self.assertEqual(st.reason, "MaxUpdatesReached")
            self.assertTrue(st.HasField("last_accuracy"))
            self.assertEqual(st.last_eval_version, job.master_version())
            self.assertEqual(read_result(eval_result)["evaluations"], 1)
            self.assertIn("evaluating the final model", job.log("py-late-evaluator"))
        finally:
            job.close()

    def test_a_target_the_evaluation_lacks_fails_the_evaluator_clearly(self):
        job = Job(self.dir.name, "fp32", updates=5000, eval_every=20,
                  target="{metric: f1, atLeast: 0.9}")
        try:
            evaluator, _ = job.trainer("py-evaluator", role="evaluator")
            trainer, _ = job.trainer("py-trainer")
            self.assertNotEqual(evaluator.wait(timeout=240), 0, job.log("py-evaluator"))
            self.assertIn("spec.training.target.metric is 'f1', which eval_fn does not return "
                          "(it returned ['accuracy', 'loss'])", job.log("py-evaluator"))
            trainer.kill()
            trainer.wait()
        finally:
            job.close()

    def test_data_the_trainers_code_reads_covered_exactly_once(self):
        # spec.data.format custom: the job gives only the training set's
        # size; the trainer's own dataset (2000 of Fashion-MNIST's images)
        # is read by its code, and each epoch covers every sample once.
        job = Job(self.dir.name, "fp32", updates=0, epochs=2, model="{fromTrainer: true}",
                  data_spec="{format: custom, trainSamples: 2000, shuffleSeed: 3}")
        try:
            # A trainer whose dataset has another size is refused by name.
            other, _ = job.trainer("py-other", extra=["--samples", "1999"])
            self.assertNotEqual(other.wait(timeout=120), 0)
            self.assertIn("2000", job.log("py-other"))
            trainer, result = job.trainer("py-custom", extra=["--samples", "2000"])
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-custom"))
            st = job.status()
            self.assertEqual((st.phase, st.reason), (pb.JOB_PHASE_SUCCEEDED, "EpochsCompleted"))
            r = read_result(result)
            self.assertEqual((r["samples"], r["skipped"]), (2 * 2000, 0))
            self.assertEqual(job.master_version(), r["batches"])
        finally:
            job.close()

    def test_a_model_the_trainer_declares(self):
        # spec.model.fromTrainer: no TorchScript, no built-in. The master
        # waits until the first trainer declares its BatchNorm CNN (names,
        # shapes, initial values, buffers), then serves it; the Python
        # evaluator waits for it and scores it. (A declaration of another
        # model is refused: master_process_test.)
        sys.path.insert(0, os.path.dirname(EXAMPLE))
        import fashion_mnist_mlp
        module = fashion_mnist_mlp.BatchNormCNN()
        job = Job(self.dir.name, "fp32", updates=300, model="{fromTrainer: true}",
                  eval_every=100)
        try:
            d = job._call(job._master.Describe, pb.DescribeRequest())
            self.assertTrue(d.awaiting_model)
            evaluator, eval_result = job.trainer("py-evaluator", role="evaluator", model="bn-cnn")
            trainer, result = job.trainer("py-trainer", model="bn-cnn")
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-trainer"))
            self.assertEqual(evaluator.wait(timeout=60), 0, job.log("py-evaluator"))
            d = job._call(job._master.Describe, pb.DescribeRequest())
            self.assertFalse(d.awaiting_model)
            self.assertEqual([t.name for t in d.layout.tensors],
                             [n for n, _ in module.named_parameters()])
            self.assertEqual([b.name for b in d.layout.buffers],
                             [n for n, _ in module.named_buffers()])
            self.assertIn("declared the model: the job's model now", job.log("py-trainer"))
            e = read_result(eval_result)
            self.assertGreaterEqual(e["evaluations"], 1)
            self.assertGreater(e["accuracy"], 0.5)
            self.assertEqual(job.status().phase, pb.JOB_PHASE_SUCCEEDED)
        finally:
            job.close()

    def test_batchnorm_statistics_reach_the_master(self):
        # A BatchNorm CNN whose TorchScript is the job's model: the trainer
        # sends its running statistics every 16 pushes and when a task
        # ends; the master folds them in and serves them, as the evaluator
        # and `gaptrain export` read them.
        sys.path.insert(0, os.path.dirname(EXAMPLE))
        import torch
        import fashion_mnist_mlp
        scripted = os.path.join(self.dir.name, "bn_cnn.pt")
        module = fashion_mnist_mlp.BatchNormCNN()
        torch.jit.script(module).save(scripted)
        job = Job(self.dir.name, "fp32", updates=100, model="{torchscript: %s}" % scripted)
        try:
            described = job._call(job._master.Describe, pb.DescribeRequest()).layout.buffers
            self.assertEqual([b.name for b in described],
                             [name for name, _ in module.named_buffers()])
            before = job._call(job._master.PullBuffers, pb.PullBuffersRequest())
            self.assertEqual(before.merges, 0)
            trainer, result = job.trainer("py-trainer-bn", model="bn-cnn")
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-trainer-bn"))
            r = read_result(result)
            after = job._call(job._master.PullBuffers, pb.PullBuffersRequest())
            self.assertGreaterEqual(after.merges, r["batches"] // 16)
            values = {}
            at = 0
            for name, b in module.named_buffers():
                n = b.numel() * b.element_size()
                values[name] = torch.frombuffer(bytearray(after.values[at:at + n]),
                                                dtype=b.dtype).reshape(b.shape)
                at += n
            self.assertEqual(at, len(after.values))
            # Trained statistics, not the initial 0 and 1; the count is the
            # trainer's forwards, at most 16 pushes behind its last.
            self.assertGreater(values["bn1.running_mean"].abs().max().item(), 0.01)
            self.assertFalse(torch.allclose(values["bn2.running_var"], torch.ones(16)))
            count = values["bn1.num_batches_tracked"].item()
            self.assertGreaterEqual(count, r["batches"] - 16)
            self.assertLessEqual(count, r["batches"] + 16)
        finally:
            job.close()

    def test_a_users_own_model_and_dataset_from_the_environment(self):
        # examples/python: a CNN that is none of the built-ins (the master
        # learns its layout from its TorchScript) on a Dataset of the user's
        # own with augmentation, started with no flags: the settings come
        # from $GAPTRAIN_*, the data from the job's spec.data.path.
        scripted = os.path.join(self.dir.name, "fashion_cnn.pt")
        subprocess.run([sys.executable, os.path.join(USER_EXAMPLE, "export_model.py"), scripted],
                       check=True, stdout=subprocess.DEVNULL)
        job = Job(self.dir.name, "fp32", updates=150, model="{torchscript: %s}" % scripted)
        try:
            trainer, result = job.user_trainer("py-user-cnn")
            port = wait_for_port(os.path.join(self.dir.name, "py-user-cnn.ports"), trainer,
                                 lambda: job.log("py-user-cnn"))
            self.assertEqual(http_get(port, "/healthz"), (200, "ok"))
            self.assertEqual(trainer.wait(timeout=240), 0, job.log("py-user-cnn"))
            r = read_result(result)
            self.assertEqual((r["reason"], r["skipped"]), ("finished", 0))
            self.assertEqual(job.status().phase, pb.JOB_PHASE_SUCCEEDED)
            self.assertGreaterEqual(job.master_version(), 150)
            self.assertIn("worker py-user-cnn (trainer)", job.log("py-user-cnn"))
            self.assertLess(mean(r["losses"][-20:]), 0.8 * mean(r["losses"][:20]))
        finally:
            job.close()

    def test_the_users_own_loop_with_clipping_and_autocast(self):
        # The example's loop written out (gaptrain.Trainer): bfloat16
        # autocast on the CPU, the gradient unscaled and clipped to norm
        # 1, scaler.step(trainer.optimizer) pushing it.
        job = Job(self.dir.name, "fp32", updates=200)
        try:
            r = self.train_to_the_end(job, "py-own-loop", extra=[
                "--own-loop", "--clip-norm", "1.0", "--autocast"])
            self.assertGreaterEqual(r["batches"], 200)
            self.assertLess(mean(r["losses"][-20:]), 0.7 * mean(r["losses"][:20]))
        finally:
            job.close()

    def test_a_store_that_is_away_is_waited_for(self):
        # The dataset's store refuses connections for a while (sample 40,
        # three reads): the trainer hands its task back each time
        # (ReleaseTask), the coordinator's /status says why meanwhile, the
        # task comes back from the front of the queue, and once the store
        # answers the job finishes with every sample trained once by the
        # completed tasks. 640 samples make tasks of two batches, sample 40
        # in the second batch of its task: the first one, pushed before
        # each refusal, counts for nothing.
        sys.path.insert(0, os.path.dirname(EXAMPLE))
        import torch
        import gaptrain
        import fashion_mnist_mlp
        from gaptrain.epoch_order import epoch_permutation

        n, refused = 640, 40
        job = None

        class Flaky(torch.utils.data.Dataset):
            def __init__(self, base):
                self.base, self.refusals, self.seen = base, 3, []

            def __len__(self):
                return n

            def __getitem__(self, i):
                if i == refused and self.refusals > 0:
                    if self.refusals < 3:  # a release happened: the job says why
                        self.seen.append(json.loads(http_get(job.http_port, "/status")[1]))
                    self.refusals -= 1
                    raise ConnectionRefusedError(111, "store:9000 refused the connection")
                return self.base[i]

        torch.manual_seed(0)
        job = Job(self.dir.name, "fp32", updates=0, epochs=1, model="{fromTrainer: true}",
                  data_spec="{format: custom, trainSamples: %d, shuffleSeed: 3}" % n)
        try:
            options = gaptrain.parse_options(
                ["--job", job.job, "--coordinator", job.coordinator, "--host-name", "in-process",
                 "--http-address", "127.0.0.1", "--http-port", "0", "--threads", "1"],
                {"GAPTRAIN_TOKEN": TOKEN})
            dataset = Flaky(fashion_mnist_mlp.FashionMNIST(data_dir()))
            with self.assertLogs("gaptrain", level="WARNING") as logs:
                result = gaptrain.train(fashion_mnist_mlp.MLP(), dataset,
                                        torch.nn.CrossEntropyLoss(), options=options,
                                        handle_signals=False, heap_policy=False,
                                        batch_process=False)
            self.assertEqual((result.reason, result.skipped), ("finished", 0))
            self.assertEqual((result.data_errors, dataset.refusals), (3, 0))
            handed_back = [line for line in logs.output
                           if "data unavailable (ConnectionRefusedError" in line]
            self.assertEqual(len(handed_back), 3, logs.output)
            self.assertIn("handed back to the coordinator", handed_back[0])

            # While the store was away, /status said so: since the first
            # release, the trainer's message, who, how many.
            self.assertEqual(len(dataset.seen), 2)
            for releases, status in enumerate(dataset.seen, start=1):
                away = status["dataUnavailable"]
                self.assertEqual((away["releases"], away["worker"], away["host"]),
                                 (releases, result.worker_id, "in-process"))
                self.assertIn("ConnectionRefusedError: [Errno 111] store:9000 refused",
                              away["message"])
                self.assertEqual(status["tasks"]["released"], releases)
            self.assertEqual(dataset.seen[0]["dataUnavailable"]["since"],
                             dataset.seen[1]["dataUnavailable"]["since"])

            st = job.status()
            self.assertEqual((st.phase, st.reason), (pb.JOB_PHASE_SUCCEEDED, "EpochsCompleted"))
            self.assertEqual((st.tasks_released, st.tasks_reassigned), (3, 0))
            self.assertFalse(st.HasField("data_unavailable"))  # the completions cleared it
            status = json.loads(http_get(job.http_port, "/status")[1])
            self.assertEqual(status["tasks"]["released"], 3)
            self.assertNotIn("dataUnavailable", status)
            log = job.log("coordinator", tail=None)
            self.assertEqual(log.count("handed back by worker %d: data unavailable: "
                                       "ConnectionRefusedError" % result.worker_id), 3, log)
            self.assertIn("the data is available again", log)

            # Completed tasks cover the epoch once; the batch pushed before
            # each refusal was trained again with its task, not credited.
            completed = sorted((int(b), int(e)) for b, e in re.findall(
                r"positions \[(\d+), (\d+)\)\) completed by worker", log))
            self.assertEqual(completed[0][0], 0)
            self.assertEqual(completed[-1][1], n)
            for (_, end), (begin, _) in zip(completed, completed[1:]):
                self.assertEqual(end, begin)
            position = epoch_permutation(3, 0, n).index(refused)
            task_begin = max(b for b, _ in completed if b <= position)
            in_vain = position // 32 * 32 - task_begin
            self.assertEqual(in_vain, 32)  # the task's first batch
            self.assertEqual(result.samples, n + 3 * in_vain)
            self.assertEqual(job.master_version(), result.batches)
        finally:
            job.close()

    def test_the_loop_is_the_callers(self):
        # In this process: a model of two inputs from dict samples, a loop
        # that leaves every 4th batch unstepped (skipped, its samples
        # covered), step() outside a batch refused.
        sys.path.insert(0, os.path.dirname(EXAMPLE))
        import torch
        import gaptrain
        import fashion_mnist_mlp

        class TwoInputs(fashion_mnist_mlp.MLP):  # builtin mlp's layout
            def forward(self, image, scale):
                return super().forward(image * scale[:, None, None, None])

        class Named(torch.utils.data.Dataset):
            def __init__(self, base):
                self.base = base

            def __len__(self):
                return len(self.base)

            def __getitem__(self, i):
                x, y = self.base[i]
                return {"image": x, "scale": torch.tensor(1.0)}, y

        torch.manual_seed(0)
        model = TwoInputs()
        job = Job(self.dir.name, "fp32", updates=100)
        try:
            options = gaptrain.parse_options(
                ["--job", job.job, "--coordinator", job.coordinator, "--host-name", "in-process",
                 "--http-address", "127.0.0.1", "--http-port", "0", "--threads", "1"],
                {"GAPTRAIN_TOKEN": TOKEN})
            trainer = gaptrain.Trainer(model, Named(fashion_mnist_mlp.FashionMNIST(data_dir())),
                                       options=options, handle_signals=False,
                                       heap_policy=False, batch_process=False)
            with self.assertRaisesRegex(gaptrain.GaptrainError, "step.. without a batch"):
                trainer.step()
            seen, unstepped, accepted, refused = 0, 0, 0, 0
            with trainer:
                for inputs, targets in trainer.batches():
                    seen += 1
                    self.assertEqual(set(inputs), {"image", "scale"})
                    if seen % 4 == 0:
                        unstepped += 1
                        continue
                    loss = torch.nn.functional.cross_entropy(model(**inputs), targets)
                    loss.backward()
                    if trainer.step(loss.item()):
                        accepted += 1
                    else:  # skipped, or to come again: the master went away
                        refused += 1
                    with self.assertRaisesRegex(gaptrain.GaptrainError, "once per batch"):
                        trainer.step()
            r = trainer.result
            self.assertEqual(r.reason, "finished")
            self.assertEqual(r.batches, accepted)
            self.assertEqual(seen, unstepped + accepted + refused)
            self.assertGreaterEqual(r.skipped, unstepped)
            self.assertLessEqual(r.skipped, unstepped + refused)
            self.assertLessEqual(refused, 3)
            self.assertGreaterEqual(job.master_version(), 100)
            self.assertEqual(job.status().phase, pb.JOB_PHASE_SUCCEEDED)
            with self.assertRaisesRegex(gaptrain.GaptrainError, "closed"):
                next(iter(trainer.batches()))
        finally:
            job.close()

    def test_a_master_with_another_model_is_refused(self):
        job = Job(self.dir.name, "fp32", updates=100)  # builtin mlp
        try:
            trainer, _ = job.trainer("py-trainer-wrong", model="cnn")
            self.assertEqual(trainer.wait(timeout=60), 1)
            log = job.log("py-trainer-wrong")
            self.assertIn("the master holds another model", log)
            self.assertEqual(job.status().failed, 1)
        finally:
            job.close()


if __name__ == "__main__":
    unittest.main()
