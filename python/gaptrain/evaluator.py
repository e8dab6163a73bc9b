"""The job's evaluator from the user's own code: gaptrain-worker --role
evaluator's part (services/worker/evaluation_loop.cc) with the user's model,
test set and evaluation function. It registers as the job's evaluator,
watches the master's version (with spec.master.shards, the lowest of the
shards'), and every spec.training.evalEveryUpdates updates reads θ (an
observer pull of every shard) and the module's buffers, evaluates, and
reports the accuracy, the loss and eval_fn's other metrics to the
coordinator, which may end the job on spec.training.target. When the job ends it evaluates the final
model once more, so the job's last accuracy is the final model's."""

import json
import logging
import math
import re
import time

import torch

from gaptrain import job_role
from gaptrain import options as options_mod
from gaptrain.compute_threads import set_compute_threads
from gaptrain.coordinator_client import CoordinatorSession
from gaptrain.http_server import HttpServer
from gaptrain.master_session import MasterSession, master_addresses
from gaptrain.metrics import WorkerMetrics
from gaptrain.parameter_mirror import parameter_device
from gaptrain.preemption import PreemptionSignals
from gaptrain.rpc import Error, GaptrainError, Stop
from gaptrain._proto import gaptrain_pb2 as pb

log = logging.getLogger("gaptrain")

# How often the master's version is read between evaluations (as
# gaptrain-worker's --poll).
POLL_SECONDS = 0.5
# How long the final evaluation may keep retrying a master or coordinator
# that is going away.
FINAL_EVALUATION_SECONDS = 30


def classification(model, dataset, batch_size=256):
    """The default evaluation: top-1 accuracy and mean cross-entropy of
    `model` (in eval mode, no gradients) over `dataset`'s (input, class)
    pairs, batch by batch on the model's device."""
    device = parameter_device(list(model.parameters()))
    loss_sum, correct, n = 0.0, 0, 0
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size)
    for inputs, targets in loader:
        if device is not None and device.type != "cpu":
            inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        loss_sum += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
        correct += (logits.argmax(dim=1) == targets).sum().item()
        n += len(targets)
    if n == 0:
        raise GaptrainError("the evaluation dataset is empty")
    return {"accuracy": correct / n, "loss": loss_sum / n}


class EvalResult:
    """What the evaluator did: evaluations reported, the last one's numbers."""

    def __init__(self):
        self.evaluations = 0
        self.accuracy = math.nan
        self.loss = math.nan
        self.version = 0
        self.metrics = {}  # the last evaluation's, as eval_fn returned them

    def as_dict(self):
        return dict(self.__dict__)

    def save(self, path):
        """Writes as_dict() to `path` as JSON."""
        with open(path, "w") as f:
            json.dump(self.as_dict(), f)

    def __repr__(self):
        return "EvalResult(%d evaluations, last accuracy %.4f, loss %.4f at version %d)" % (
            self.evaluations, self.accuracy, self.loss, self.version)


# A metric's name as the coordinator and Prometheus labels take it
# (kMetricNamePattern in services/api/training_job.h), and how many.
METRIC_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
MAX_METRICS = 32


def _check_result(result, target_metric=""):
    """eval_fn's dict: (accuracy, loss, [(name, value)] of the other
    metrics, sorted). Accuracy must be in [0, 1]; the other metrics need
    names as METRIC_NAME and finite numbers; `target_metric` (the job's)
    must be among them."""
    if not isinstance(result, dict):
        raise GaptrainError("eval_fn returned %r: it must return a dict with 'accuracy' and "
                            "'loss'" % (result,))
    for key in ("accuracy", "loss"):
        if key not in result:
            raise GaptrainError("eval_fn returned no %r (it returned %s)" %
                                (key, sorted(map(str, result))))
    accuracy, loss = float(result["accuracy"]), float(result["loss"])
    if not 0.0 <= accuracy <= 1.0:
        raise GaptrainError("eval_fn's accuracy %r is not in [0, 1]" % (accuracy,))
    others = []
    for name, value in result.items():
        if name in ("accuracy", "loss"):
            continue
        if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
            raise GaptrainError("eval_fn's metric %r: a name is lower-case letters, digits and "
                                "'_', starting with a letter, at most 63 characters" % (name,))
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise GaptrainError("eval_fn's metric %r is %r, not a number" % (name, value))
        if not math.isfinite(number):
            raise GaptrainError("eval_fn's metric %r is %r, not finite" % (name, number))
        others.append((name, number))
    if len(others) > MAX_METRICS:
        raise GaptrainError("eval_fn returned %d metrics beside accuracy and loss; at most %d" %
                            (len(others), MAX_METRICS))
    if target_metric and target_metric not in result:
        raise GaptrainError("spec.training.target.metric is %r, which eval_fn does not return "
                            "(it returned %s)" % (target_metric, sorted(result)))
    return accuracy, loss, sorted(others)


class Evaluator:
    def __init__(self, model, dataset, eval_fn, opts, stop=None, metrics=None):
        self.model = model
        self.dataset = dataset
        self.eval_fn = eval_fn
        self.opts = opts
        self.stop = stop or Stop()
        self.metrics = metrics or WorkerMetrics()
        self.session = CoordinatorSession(opts, self.stop, self.metrics)
        self.master = None
        self.result = EvalResult()

    def run(self):
        job_role.run(self._setup, self._loop, self._finish)
        return self.result

    def _setup(self):
        reg = job_role.register(self.session, self.stop)
        if reg is None:
            return False
        if reg.role != pb.WORKER_ROLE_EVALUATOR:
            raise GaptrainError("asked to evaluate, but the coordinator registered this worker "
                                "as %s" % pb.WorkerRole.Name(reg.role))
        self.session.start_heartbeats()
        if self.opts.threads > 0:
            set_compute_threads(self.opts.threads)
        self.master = MasterSession(self.opts, self.stop, self.session, self.metrics,
                                    self.model.named_parameters(), self.model.named_buffers())
        if not self.master.connect(master_addresses(reg), declare=False):
            return False
        log.info("evaluator ready: %d test samples, every %d master updates", len(self.dataset),
                 self.opts.eval_every_updates)
        if reg.phase in (pb.JOB_PHASE_SUCCEEDED, pb.JOB_PHASE_FAILED):
            # Started after the job ended: the final model still gets its score.
            log.info("the job has %s: evaluating the final model",
                     "succeeded" if reg.phase == pb.JOB_PHASE_SUCCEEDED else "failed")
            self.stop.stop(Stop.JOB_ENDED)
        return True

    def _loop(self):
        every = max(1, self.opts.eval_every_updates)
        next_at = every
        while not self.stop.stopped:
            version = self.master.version()
            if version is None:
                break
            if version >= next_at:
                self._evaluate(deadline=None)
                next_at = self.result.version + every
            else:
                self.stop.sleep(POLL_SECONDS)
        if self.stop.reason == Stop.JOB_ENDED:
            try:
                self._evaluate(deadline=time.monotonic() + FINAL_EVALUATION_SECONDS)
            except (Error, GaptrainError) as e:
                log.warning("final evaluation failed: %s", e)

    def _evaluate(self, deadline):
        """Pulls θ and the buffers, evaluates, reports; retried on transient
        failures (until `deadline`, or while not stopped without one)."""
        start = time.monotonic()
        version = self.master.observe(deadline)
        if version is None:
            return  # stopped
        if self.result.evaluations and version == self.result.version:
            return
        self.model.eval()
        with torch.no_grad():
            result = self.eval_fn(self.model, self.dataset)
        accuracy, loss, others = _check_result(result, self.opts.target_metric)
        seconds = time.monotonic() - start
        if not math.isfinite(loss) or loss < 0:
            log.warning("evaluation of version %d gave loss %s: not reported", version, loss)
            return
        self.result.evaluations += 1
        self.result.accuracy, self.result.loss, self.result.version = accuracy, loss, version
        self.result.metrics = dict(others, accuracy=accuracy, loss=loss)
        self.metrics.record_evaluation(accuracy, loss, version, seconds, others)
        extra = "".join(", %s %.4g" % (k, v) for k, v in others)
        log.info("evaluation: version %d, accuracy %.4f, loss %.4f%s (%.2f s)", version,
                 accuracy, loss, extra, seconds)
        phase = self.session.report_evaluation(accuracy, loss, version, others)
        if phase in (pb.JOB_PHASE_SUCCEEDED, pb.JOB_PHASE_FAILED) and not self.stop.stopped:
            log.info("the job has %s", "succeeded" if phase == pb.JOB_PHASE_SUCCEEDED
                     else "failed")
            self.stop.stop(Stop.JOB_ENDED)

    def _finish(self, status):
        if status is not None:
            log.error("evaluator stopped: %s", status)
        reason, deadline = job_role.leave_terms(status, self.stop, self.opts.grace_seconds)
        self.session.leave(reason, "" if status is None else str(status), deadline)
        log.info("evaluator done: %r", self.result)
        self.session.close()
        if self.master is not None:
            self.master.close()


def evaluate(model, dataset, eval_fn=None, argv=None, environ=None, options=None,
             handle_signals=True):
    """Runs the job's evaluator with the user's `model` and test `dataset`:
    `eval_fn(model, dataset)` returns a dict with "accuracy" (in [0, 1]) and
    "loss" (finite, >= 0), and may add metrics of its own (names of
    lower-case letters, digits and '_', finite numbers, at most 32: reported
    to the coordinator, so spec.training.target may name one, shown in
    status and exported as gaptrain_worker_eval_metric); by default top-1 accuracy and mean cross-entropy of
    (input, class) pairs (classification()). The model is evaluated in eval
    mode without gradients, with the master's θ and buffers (BatchNorm's
    statistics). Settings as train() takes them (gaptrain-worker's flags,
    else $GAPTRAIN_*; the role must be evaluator or unset). Serves /healthz
    and /metrics (gaptrain_worker_eval_*). SIGTERM and SIGINT stop it
    (handle_signals=False leaves them alone). Returns an EvalResult when the
    job ended or the evaluator was stopped; raises GaptrainError
    after leaving the job with FAILED on an error retrying cannot fix."""
    opts = options if options is not None else options_mod.parse(argv, environ,
                                                                  role="evaluator")
    if eval_fn is None:
        batch = opts.batch_size

        def eval_fn(m, d):
            return classification(m, d, batch_size=batch)
    device = parameter_device(list(model.parameters()))
    metrics = WorkerMetrics(device=str(device) if device is not None else "several")
    try:
        http = HttpServer(metrics, opts.http_address, opts.http_port, opts.ports_file)
    except OSError as e:
        raise GaptrainError("--http-port %d (or $GAPTRAIN_HTTP_PORT): cannot serve /metrics on "
                            "%s: %s" % (opts.http_port, opts.http_address, e))
    log.info("worker %s (evaluator) of job %s: metrics on http://%s:%d/metrics", opts.host_name,
             opts.job_name, opts.http_address, http.port)
    stop = Stop()
    signals = PreemptionSignals(stop) if handle_signals else None
    if signals is not None:
        signals.install()
    try:
        return Evaluator(model, dataset, eval_fn, opts, stop=stop, metrics=metrics).run()
    finally:
        if signals is not None:
            signals.restore()
        http.stop()
