"""What a trainer and the evaluator share around their own work: running
it (set up, loop, then leave the job, with FAILED and the error when one
escaped, and raise it), registering (None when stopped meanwhile), and the
reason and deadline of the Leave a stop calls for."""

import time

from gaptrain.rpc import Error, GaptrainError, Stop
from gaptrain._proto import gaptrain_pb2 as pb


def run(setup, loop, finish):
    """setup(), then loop() when setup returned True; finish(error or None)
    always; then raises the error (a GaptrainError for ours)."""
    status = None
    try:
        if setup():
            loop()
    except Exception as e:  # ours, or a bug in the user's code: leave, then raise
        status = e
    finish(status)
    if status is not None:
        if isinstance(status, GaptrainError):
            raise status
        if isinstance(status, Error):
            raise GaptrainError(str(status)) from status
        raise status


def register(session, stop):
    """The registration, or None when stopped while registering."""
    try:
        return session.register()
    except Error:
        if stop.stopped:
            return None
        raise


def leave_terms(status, stop, grace_seconds):
    """(LeaveReason, monotonic deadline) for leaving after `status`: FAILED
    on an error; PREEMPTED after SIGTERM, within at most a second of what
    the grace period left; FINISHED otherwise, within 10 s."""
    if status is not None:
        return pb.LEAVE_REASON_FAILED, time.monotonic() + 10
    if stop.reason == Stop.PREEMPTED:
        return pb.LEAVE_REASON_PREEMPTED, min(
            time.monotonic() + 1.0, max(stop.time + grace_seconds, time.monotonic() + 0.05))
    return pb.LEAVE_REASON_FINISHED, time.monotonic() + 10
