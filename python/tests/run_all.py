#!/usr/bin/env python3
"""Runs every test of the package (python/tests/test_*.py) and, when
$XML_OUTPUT_FILE is set (Bazel), writes the cases in GoogleTest's XML shape,
which scripts/test.sh counts. Exit status 0 when all passed. With
`--skip-all REASON` it runs nothing and reports one skipped case.
  /usr/bin/python3 python/tests/run_all.py"""

import os
import sys
import time
import unittest
from xml.sax.saxutils import quoteattr

HERE = os.path.dirname(os.path.abspath(__file__))


class Result(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = []  # (suite, name, outcome, message, seconds)
        self._start = 0.0

    def startTest(self, test):
        self._start = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, message=""):
        suite, _, name = test.id().rpartition(".")
        self.cases.append((suite, name, outcome, message, time.monotonic() - self._start))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)


def write_xml(path, cases):
    failures = sum(1 for c in cases if c[2] == "failure")
    errors = sum(1 for c in cases if c[2] == "error")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<testsuites tests="%d" failures="%d" disabled="0" errors="%d" name="python">' %
             (len(cases), failures, errors)]
    for suite, name, outcome, message, seconds in cases:
        result = "skipped" if outcome == "skipped" else "completed"
        lines.append('  <testcase name=%s status="run" time="%.3f" classname=%s result="%s">' %
                     (quoteattr(name), seconds, quoteattr(suite), result))
        if outcome == "skipped":
            lines.append("    <skipped message=%s/>" % quoteattr(message))
        elif outcome in ("failure", "error"):
            lines.append("    <failure message=%s/>" % quoteattr(message))
        lines.append("  </testcase>")
    lines.append("</testsuites>")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if sys.argv[1:2] == ["--skip-all"]:  # nothing to run the tests with: say so
        print("SKIPPED: %s" % sys.argv[2])
        if os.environ.get("XML_OUTPUT_FILE"):
            write_xml(os.environ["XML_OUTPUT_FILE"],
                      [("run_all", "every_test", "skipped", sys.argv[2], 0.0)])
        return 0
    import torch
    print("python %s, torch %s (%s)" % (sys.version.split()[0], torch.__version__,
                                       sys.executable), flush=True)
    suite = unittest.defaultTestLoader.discover(HERE, top_level_dir=HERE)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=Result)
    result = runner.run(suite)
    if os.environ.get("XML_OUTPUT_FILE"):
        write_xml(os.environ["XML_OUTPUT_FILE"], result.cases)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
