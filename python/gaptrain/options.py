"""The flags and environment a trainer starts with: the same as
gaptrain-worker's (services/worker/worker_options.h), so the operator and
`gaptrain run` can start a Python trainer as they start the C++ one."""

import argparse
import os
import socket

import yaml

from gaptrain._proto import gaptrain_pb2 as pb


class OptionsError(ValueError):
    """A bad flag or job file; the message names it."""


class Options:
    def __init__(self):
        self.job_file = ""
        self.coordinator = ""
        self.token = ""
        self.allow_no_token = False
        self.coordinator_ca = ""
        self.master_ca = ""
        self.threads = 0
        self.grace_seconds = 20.0
        self.host_name = ""
        # Read from the job file:
        self.job_name = ""
        self.wire_type = pb.FLOAT32
        self.mode = "async"
        self.rule = "gap-aware"


def _parser():
    p = argparse.ArgumentParser(prog="gaptrain", add_help=False)
    p.add_argument("--job", dest="job_file", default="")
    p.add_argument("--coordinator", default="")
    p.add_argument("--token-file", default="")
    p.add_argument("--insecure-no-token", action="store_true")
    p.add_argument("--coordinator-ca", default="")
    p.add_argument("--master-ca", default="")
    p.add_argument("--role", default="trainer")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--grace-seconds", type=float, default=20.0)
    p.add_argument("--host-name", default="")
    # Accepted for the C++ worker's command line; not used by this increment
    # (no /metrics server, no device choice, the user's dataset is their own).
    for flag in ("--device", "--http-address", "--http-port", "--data-dir", "--data-cache",
                 "--ports-file"):
        p.add_argument(flag, default="")
    return p


def _get(tree, *path, default=None):
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return default
        tree = tree[key]
    return tree


def read_job(options, job_file):
    try:
        with open(job_file) as f:
            job = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise OptionsError("--job %s: %s" % (job_file, e))
    if not isinstance(job, dict):
        raise OptionsError("--job %s: not a TrainingJob" % job_file)
    options.job_name = str(_get(job, "metadata", "name", default=""))
    wire = _get(job, "spec", "training", "wireType", default="fp32")
    if wire not in ("fp32", "bf16"):
        raise OptionsError("spec.training.wireType: %r is not fp32 or bf16" % (wire,))
    options.wire_type = pb.BFLOAT16 if wire == "bf16" else pb.FLOAT32
    options.mode = _get(job, "spec", "training", "mode", default="async")
    options.rule = _get(job, "spec", "training", "staleness", "rule", default="gap-aware")


def parse(argv=None, environ=None):
    """Options from flags (unknown ones are left to the user's script) and
    the environment ($GAPTRAIN_TOKEN, $HOSTNAME)."""
    environ = os.environ if environ is None else environ
    args, _ = _parser().parse_known_args(argv)
    o = Options()
    if not args.job_file:
        raise OptionsError("--job: required (the TrainingJob file)")
    if not args.coordinator:
        raise OptionsError("--coordinator: required (HOST:PORT)")
    if args.role != "trainer":
        raise OptionsError("--role: a Python trainer is a trainer, not %r" % args.role)
    if args.grace_seconds <= 0 or args.grace_seconds > 86400:
        raise OptionsError("--grace-seconds: must be in (0, 86400]")
    if args.threads < 0:
        raise OptionsError("--threads: must be >= 0")
    o.job_file = args.job_file
    o.coordinator = args.coordinator
    o.allow_no_token = args.insecure_no_token
    o.coordinator_ca = args.coordinator_ca
    o.master_ca = args.master_ca
    o.threads = args.threads
    o.grace_seconds = args.grace_seconds
    if args.token_file:
        try:
            with open(args.token_file) as f:
                o.token = f.read().strip()
        except OSError as e:
            raise OptionsError("--token-file %s: %s" % (args.token_file, e))
    else:
        o.token = environ.get("GAPTRAIN_TOKEN", "").strip()
    if not o.token and not o.allow_no_token:
        raise OptionsError("--token-file: no job token (set it, or $GAPTRAIN_TOKEN)")
    o.host_name = args.host_name or environ.get("HOSTNAME", "") or socket.gethostname()
    read_job(o, o.job_file)
    return o
