"""What a Python trainer exports on /metrics: gaptrain-worker's metrics
(services/worker/worker_metrics.cc, docs/metrics.md "Worker"), the same
names, types, labels and buckets, in the Prometheus text format. A small
thread-safe registry of its own: no prometheus_client dependency."""

import math
import threading
import time

# gaptrain-worker's step buckets (worker_metrics.cc, StepBuckets).
STEP_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                0.5, 1, 2.5, 5, 10)
EVAL_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100)
RATE_WINDOW_SECONDS = 2.0
CONTENT_TYPE = "text/plain; version=0.0.4"


def _value(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def _labels(pairs):
    if not pairs:
        return ""
    return "{%s}" % ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"')
                                          .replace("\n", "\\n")) for k, v in pairs)


class _Family:
    def __init__(self, name, kind, help_text, buckets=None):
        self.name, self.kind, self.help = name, kind, help_text
        self.buckets = buckets
        self.series = {}  # label pairs -> value, or [bucket counts, sum, count]

    def render(self, out):
        out.append("# HELP %s %s" % (self.name, self.help))
        out.append("# TYPE %s %s" % (self.name, self.kind))
        for labels, v in self.series.items():
            if self.kind != "histogram":
                out.append("%s%s %s" % (self.name, _labels(labels), _value(v)))
                continue
            counts, total, count = v
            out.append("%s_count%s %s" % (self.name, _labels(labels), _value(count)))
            out.append("%s_sum%s %s" % (self.name, _labels(labels), _value(total)))
            cumulative = 0
            for bound, c in zip(self.buckets, counts):
                cumulative += c
                out.append("%s_bucket%s %d" % (self.name, _labels(labels + (("le", _value(
                    float(bound))),)), cumulative))
            out.append("%s_bucket%s %d" % (self.name, _labels(labels + (("le", "+Inf"),)),
                                           count))


class WorkerMetrics:
    """gaptrain-worker's WorkerMetrics for a Python trainer: every method is
    thread-safe (the trainer loop, the heartbeat thread and the HTTP
    server's threads share it)."""

    def __init__(self, device="cpu"):
        self._mu = threading.Lock()
        self._families = []
        self._steps = self._family(
            "gaptrain_worker_step_duration_seconds", "histogram",
            "Time of each phase of a training step: pull (parameters from the master), compute "
            "(batch, forward, backward), push (the gradient).", STEP_BUCKETS)
        for phase in ("pull", "compute", "push"):
            self._steps.series[(("phase", phase),)] = [[0] * len(STEP_BUCKETS), 0.0, 0]
        self._samples = self._gauge_like(
            "gaptrain_worker_samples_total", "counter",
            "Training samples whose gradient the master accepted.", 0.0)
        self._rate = self._gauge_like(
            "gaptrain_worker_samples_per_second", "gauge",
            "Training samples per second over the last few seconds.", 0.0)
        self._loss = self._gauge_like("gaptrain_worker_loss", "gauge",
                                      "Mean training loss of the last batch.", math.nan)
        self._reconnects = self._family(
            "gaptrain_worker_reconnects_total", "counter",
            "Calls that succeeded after one or more failed ones: the worker got its connection "
            "back (a restart, a network fault).")
        for service in ("master", "coordinator"):
            self._reconnects.series[(("service", service),)] = 0.0
        self._rejected = self._family("gaptrain_worker_pushes_rejected_total", "counter",
                                      "Pushes the master refused, by status code.")
        self._data_errors = self._gauge_like(
            "gaptrain_worker_data_errors_total", "counter",
            "Batches the dataset could not read because its store was away (each task handed "
            "back to the coordinator).", 0.0)
        self._version = self._gauge_like("gaptrain_worker_master_version", "gauge",
                                         "The newest master version this worker pulled.", 0.0)
        # Evaluator-only gauges: NaN on trainers, as gaptrain-worker's.
        self._eval_accuracy = self._gauge_like(
            "gaptrain_worker_eval_accuracy", "gauge",
            "Evaluator: test accuracy of the last evaluated version; NaN before.", math.nan)
        self._eval_loss = self._gauge_like(
            "gaptrain_worker_eval_loss", "gauge",
            "Evaluator: mean test cross-entropy of the last evaluated version.", math.nan)
        self._eval_version = self._gauge_like("gaptrain_worker_eval_version", "gauge",
                                              "Evaluator: the master version evaluated last.",
                                              0.0)
        self._eval_metric = self._family(
            "gaptrain_worker_eval_metric", "gauge",
            "Evaluator: the last evaluation's metrics beside accuracy and loss (eval_fn's own), "
            "by name.")
        self._eval_seconds = eval_seconds = self._family("gaptrain_worker_eval_duration_seconds", "histogram",
                                    "Evaluator: time of one evaluation (pull and the test set).",
                                    EVAL_BUCKETS)
        eval_seconds.series[()] = [[0] * len(EVAL_BUCKETS), 0.0, 0]
        self._device = self._family(
            "gaptrain_worker_device_info", "gauge",
            "1, labelled with the device the model computes on (cpu, cuda:0).")
        self._device.series[(("device", device),)] = 1.0
        self._window_start = None
        self._window_samples = 0

    def _family(self, name, kind, help_text, buckets=None):
        f = _Family(name, kind, help_text, buckets)
        self._families.append(f)
        return f

    def _gauge_like(self, name, kind, help_text, initial):
        f = self._family(name, kind, help_text)
        f.series[()] = initial
        return f

    @staticmethod
    def _into_histogram(v, buckets, seconds):
        """Counts `seconds` into a histogram series [[per bucket], sum, count]."""
        for i, bound in enumerate(buckets):
            if seconds <= bound:
                v[0][i] += 1
                break
        v[1] += seconds
        v[2] += 1

    def _observe(self, phase, seconds):
        with self._mu:
            self._into_histogram(self._steps.series[(("phase", phase),)], STEP_BUCKETS, seconds)

    def record_pull(self, seconds):
        self._observe("pull", seconds)

    def record_compute(self, seconds):
        self._observe("compute", seconds)

    def record_push(self, seconds):
        self._observe("push", seconds)

    def record_batch(self, samples, loss, now=None):
        """A batch of `samples` whose push succeeded, with its loss."""
        now = time.monotonic() if now is None else now
        with self._mu:
            self._samples.series[()] += samples
            if math.isfinite(loss):
                self._loss.series[()] = float(loss)
            if self._window_start is None:  # the first batch opens the window
                self._window_start, self._window_samples = now, 0
                return
            self._window_samples += samples
            seconds = now - self._window_start
            if seconds >= RATE_WINDOW_SECONDS:
                self._rate.series[()] = self._window_samples / seconds
                self._window_start, self._window_samples = now, 0

    def record_reconnect(self, service):
        """service: "master" or "coordinator"."""
        with self._mu:
            self._reconnects.series[(("service", service),)] += 1

    def record_data_error(self):
        with self._mu:
            self._data_errors.series[()] += 1

    def record_push_rejected(self, code):
        """code: the status code's name in lower case ("failed_precondition")."""
        with self._mu:
            key = (("code", code),)
            self._rejected.series[key] = self._rejected.series.get(key, 0.0) + 1

    def record_evaluation(self, accuracy, loss, version, seconds, metrics=()):
        """The evaluator's result for master version `version`, which took
        `seconds` (the pull and the test set); `metrics`: (name, value)
        pairs beside accuracy and loss."""
        with self._mu:
            self._eval_metric.series = {(("metric", name),): float(value)
                                        for name, value in metrics}
            self._eval_accuracy.series[()] = float(accuracy)
            self._eval_loss.series[()] = float(loss)
            self._eval_version.series[()] = float(version)
            self._into_histogram(self._eval_seconds.series[()], EVAL_BUCKETS, seconds)

    def set_master_version(self, version):
        with self._mu:
            self._version.series[()] = float(version)

    def value(self, name, **labels):
        """A series' value (a histogram's count), for tests and logs."""
        key = tuple(sorted(labels.items()))
        with self._mu:
            for f in self._families:
                if f.name == name:
                    for k, v in f.series.items():
                        if tuple(sorted(k)) == key:
                            return v[2] if f.kind == "histogram" else v
        return None

    def render(self):
        """The Prometheus text exposition of every series."""
        out = []
        with self._mu:
            for f in self._families:
                f.render(out)
        return "\n".join(out) + "\n"
