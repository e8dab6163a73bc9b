"""SIGTERM and SIGINT as a spot node's notice: the handlers train() and
evaluate() install (unless told not to) while they run, and restore after.

A signal stops the role (Stop.PREEMPTED): the trainer finishes the batch in
flight only if it fits the grace period, hands its task back and leaves.
Past the grace period the process exits with status 0, as gaptrain-worker
does, and the lease takes the task back. Python delivers signals to the
main thread only, so outside it nothing is installed (the caller then
stops the role itself, e.g. Trainer.preempt())."""

import logging
import os
import signal
import threading

from gaptrain.rpc import Stop

log = logging.getLogger("gaptrain")

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class PreemptionSignals:
    def __init__(self, stop, grace_seconds=None):
        """On SIGTERM or SIGINT, `stop` stops with PREEMPTED; with
        `grace_seconds`, the process exits (status 0) that long after."""
        self._stop = stop
        self._grace = grace_seconds
        self._previous = {}
        self._timers = []

    def install(self):
        """True when installed (on the main thread); else logs why not."""
        if threading.current_thread() is not threading.main_thread():
            log.warning("gaptrain runs outside the main thread: SIGTERM is not handled "
                        "(Python delivers signals to the main thread only)")
            return False
        for s in SIGNALS:
            self._previous[s] = signal.signal(s, self._on_signal)
        return True

    def restore(self):
        """The handlers from before install(); the exit timer cancelled."""
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()
        for t in self._timers:
            t.cancel()

    def _on_signal(self, signum, frame):
        if self._stop.stopped:
            return
        if self._grace is None:
            log.info("%s: leaving", signal.Signals(signum).name)
        else:
            log.info("%s: leaving within %g s", signal.Signals(signum).name, self._grace)
            t = threading.Timer(self._grace, lambda: os._exit(0))
            t.daemon = True
            t.start()
            self._timers.append(t)
        self._stop.stop(Stop.PREEMPTED)
