"""The trainer's /metrics and /healthz (gaptrain/metrics.py, http_server.py):
gaptrain-worker's names, types, labels and buckets in the Prometheus text
format, served on an ephemeral port written to a ports file."""

import math
import os
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gaptrain.http_server import HttpServer  # noqa: E402
from gaptrain.metrics import STEP_BUCKETS, WorkerMetrics  # noqa: E402


class MetricsTest(unittest.TestCase):
    def test_text_format(self):
        m = WorkerMetrics()
        m.record_compute(0.003)
        m.record_compute(20.0)
        m.record_batch(32, 1.5, now=100.0)
        m.record_batch(32, 1.25, now=101.0)
        m.record_batch(32, 1.0, now=102.5)  # the window closes: 64 samples in 2.5 s
        m.record_reconnect("master")
        m.record_push_rejected("failed_precondition")
        m.set_master_version(42)
        lines = m.render().splitlines()
        for line in ["# TYPE gaptrain_worker_step_duration_seconds histogram",
                     'gaptrain_worker_step_duration_seconds_count{phase="compute"} 2',
                     'gaptrain_worker_step_duration_seconds_sum{phase="compute"} 20.003',
                     'gaptrain_worker_step_duration_seconds_bucket{phase="compute",le="0.0025"} 0',
                     'gaptrain_worker_step_duration_seconds_bucket{phase="compute",le="0.005"} 1',
                     'gaptrain_worker_step_duration_seconds_bucket{phase="compute",le="10"} 1',
                     'gaptrain_worker_step_duration_seconds_bucket{phase="compute",le="+Inf"} 2',
                     'gaptrain_worker_step_duration_seconds_count{phase="pull"} 0',
                     "# TYPE gaptrain_worker_samples_total counter",
                     "gaptrain_worker_samples_total 96",
                     "gaptrain_worker_samples_per_second 25.6",
                     "gaptrain_worker_loss 1",
                     'gaptrain_worker_reconnects_total{service="master"} 1',
                     'gaptrain_worker_reconnects_total{service="coordinator"} 0',
                     'gaptrain_worker_pushes_rejected_total{code="failed_precondition"} 1',
                     "gaptrain_worker_master_version 42",
                     'gaptrain_worker_device_info{device="cpu"} 1',
                     "gaptrain_worker_eval_accuracy NaN"]:
            self.assertIn(line, lines)
        buckets = [x for x in lines if x.startswith(
            'gaptrain_worker_step_duration_seconds_bucket{phase="push"')]
        self.assertEqual(len(buckets), len(STEP_BUCKETS) + 1)
        self.assertEqual(m.value("gaptrain_worker_samples_total"), 96)
        self.assertTrue(math.isnan(WorkerMetrics().value("gaptrain_worker_loss")))

    def test_the_evaluations_own_metrics_by_name(self):
        m = WorkerMetrics()
        m.record_evaluation(0.9, 0.3, 100, 1.5, [("f1", 0.8), ("top5_accuracy", 0.99)])
        lines = m.render().splitlines()
        self.assertIn('gaptrain_worker_eval_metric{metric="top5_accuracy"} 0.99', lines)
        self.assertIn("gaptrain_worker_eval_accuracy 0.9", lines)
        # The next evaluation's replace them.
        m.record_evaluation(0.9, 0.3, 200, 1.5, [("f1", 0.85)])
        self.assertEqual(m.value("gaptrain_worker_eval_metric", metric="f1"), 0.85)
        self.assertNotIn("top5_accuracy", m.render())

    def test_served_on_an_ephemeral_port(self):
        with tempfile.TemporaryDirectory() as d:
            ports = os.path.join(d, "trainer.ports")
            m = WorkerMetrics()
            server = HttpServer(m, "127.0.0.1", 0, ports)
            try:
                with open(ports) as f:
                    self.assertEqual(int(f.read().split()[0]), server.port)
                self.assertNotEqual(server.port, 0)
                url = "http://127.0.0.1:%d" % server.port
                with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
                    self.assertEqual((r.status, r.read()), (200, b"ok"))
                m.record_batch(8, 0.5)
                with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                    self.assertTrue(r.headers["Content-Type"].startswith("text/plain"))
                    self.assertIn("gaptrain_worker_samples_total 8", r.read().decode())
                with self.assertRaises(urllib.error.HTTPError) as e:
                    urllib.request.urlopen(url + "/other", timeout=5)
                self.assertEqual(e.exception.code, 404)
            finally:
                server.stop()


if __name__ == "__main__":
    unittest.main()
