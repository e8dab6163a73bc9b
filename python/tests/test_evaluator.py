"""What an evaluation function may return (gaptrain/evaluator.py's
_check_result): accuracy and loss, and metrics of the user's own that the
coordinator takes."""

import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gaptrain.evaluator import _check_result  # noqa: E402
from gaptrain.rpc import GaptrainError  # noqa: E402


class CheckResultTest(unittest.TestCase):
    def test_accuracy_loss_and_the_users_metrics_sorted(self):
        accuracy, loss, others = _check_result(
            {"loss": 0.5, "top5_accuracy": 0.97, "accuracy": 0.8, "f1": 1}, "f1")
        self.assertEqual((accuracy, loss), (0.8, 0.5))
        self.assertEqual(others, [("f1", 1.0), ("top5_accuracy", 0.97)])
        self.assertIsInstance(others[0][1], float)

    def test_refusals_name_the_metric(self):
        cases = [
            ([1, 2], "it must return a dict with 'accuracy' and 'loss'"),
            ({"accuracy": 0.5}, "eval_fn returned no 'loss'"),
            ({"accuracy": 1.5, "loss": 0}, "accuracy 1.5 is not in [0, 1]"),
            ({"accuracy": 0.5, "loss": 0, "Top-5": 0.9}, "eval_fn's metric 'Top-5': a name is"),
            ({"accuracy": 0.5, "loss": 0, 5: 0.9}, "eval_fn's metric 5: a name is"),
            ({"accuracy": 0.5, "loss": 0, "x" * 64: 0.9}, "at most 63 characters"),
            ({"accuracy": 0.5, "loss": 0, "f1": "high"}, "eval_fn's metric 'f1' is 'high', "
                                                        "not a number"),
            ({"accuracy": 0.5, "loss": 0, "f1": math.inf}, "eval_fn's metric 'f1' is inf, "
                                                          "not finite"),
            (dict({"accuracy": 0.5, "loss": 0}, **{"m%d" % i: 1 for i in range(33)}),
             "returned 33 metrics beside accuracy and loss; at most 32"),
        ]
        for result, message in cases:
            with self.assertRaises(GaptrainError) as e:
                _check_result(result)
            self.assertIn(message, str(e.exception))

    def test_the_jobs_target_metric_must_be_returned(self):
        with self.assertRaises(GaptrainError) as e:
            _check_result({"accuracy": 0.5, "loss": 0.1}, "perplexity")
        self.assertIn("spec.training.target.metric is 'perplexity', which eval_fn does not "
                      "return (it returned ['accuracy', 'loss'])", str(e.exception))
        _check_result({"accuracy": 0.5, "loss": 0.1}, "loss")


if __name__ == "__main__":
    unittest.main()
