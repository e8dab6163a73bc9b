"""gaptrain.run_main, a script's entry point: run as real scripts, so the
exit codes and stderr are what the operator and `gaptrain run` see; and the
results' save()."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, PYTHON_DIR)

from gaptrain import EvalResult, TrainResult  # noqa: E402

SCRIPT = """
import logging
import sys
import gaptrain

def main(argv):
    logging.getLogger("gaptrain").info("main got %s", argv)
    what = argv[0]
    if what == "options":
        raise gaptrain.OptionsError("--job: no file at /nowhere")
    if what == "job":
        raise gaptrain.GaptrainError("the master refused the model: fc.weight differs")
    if what == "other":
        raise KeyError("a bug of the script's own")
    if what == "code":
        return int(argv[1])

gaptrain.run_main(main)
"""


class RunMainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.script = os.path.join(cls.dir.name, "train.py")
        with open(cls.script, "w") as f:
            f.write(SCRIPT)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def run_script(self, *args):
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
        return subprocess.run([sys.executable, self.script] + list(args), env=env,
                               capture_output=True, text=True, timeout=120)

    def assert_exits_with_one_line(self, what, code, line):
        done = self.run_script(what)
        self.assertEqual(done.returncode, code)
        self.assertIn("train.py: %s\n" % line, done.stderr)
        self.assertNotIn("Traceback", done.stderr)

    def test_a_bad_setting_exits_2_and_a_job_that_cannot_go_on_1(self):
        self.assert_exits_with_one_line("options", 2, "--job: no file at /nowhere")
        self.assert_exits_with_one_line(
            "job", 1, "the master refused the model: fc.weight differs")

    def test_any_other_exception_is_pythons_own(self):
        done = self.run_script("other")
        self.assertEqual(done.returncode, 1)
        self.assertIn("Traceback", done.stderr)
        self.assertIn("KeyError: \"a bug of the script's own\"", done.stderr)

    def test_mains_return_is_the_exit_code_and_none_is_0(self):
        self.assertEqual(self.run_script("code", "3").returncode, 3)
        done = self.run_script("nothing", "--flag")
        self.assertEqual(done.returncode, 0, done.stderr)
        # sys.argv[1:] reaches main, and the SDK's INFO lines are logged.
        self.assertIn("INFO gaptrain: main got ['nothing', '--flag']", done.stderr)


class ResultFileTest(unittest.TestCase):
    def test_save_writes_as_dict_as_json(self):
        train = TrainResult()
        train.batches, train.losses, train.reason = 7, [2.5, 1.25], "finished"
        evaluation = EvalResult()
        evaluation.evaluations, evaluation.accuracy, evaluation.loss = 2, 0.875, 0.5
        evaluation.metrics = {"top5_accuracy": 0.96875}
        with tempfile.TemporaryDirectory() as d:
            train.save(os.path.join(d, "train.json"))
            evaluation.save(os.path.join(d, "eval.json"))
            with open(os.path.join(d, "train.json")) as f:
                saved = json.load(f)
            self.assertEqual((saved["batches"], saved["losses"], saved["reason"]),
                             (7, [2.5, 1.25], "finished"))
            with open(os.path.join(d, "eval.json")) as f:
                saved = json.load(f)
            self.assertEqual(saved, {"evaluations": 2, "accuracy": 0.875, "loss": 0.5,
                                     "version": 0, "metrics": {"top5_accuracy": 0.96875}})


if __name__ == "__main__":
    unittest.main()
