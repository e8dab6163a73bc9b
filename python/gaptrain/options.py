"""The settings a trainer starts with: gaptrain-worker's flags
(services/worker/worker_options.h) and, for a user's own command started
"as given" by the operator or `gaptrain run`, the same settings as
environment variables ($GAPTRAIN_JOB, $GAPTRAIN_COORDINATOR, ...). A flag
wins over its variable."""

import argparse
import math
import os
import socket

import yaml

from gaptrain._proto import gaptrain_pb2 as pb

DEFAULT_HTTP_PORT = 9092  # gaptrain-worker's --http-port
DEFAULT_GRACE_SECONDS = 20.0

# flag -> the environment variable that sets it when the flag is absent.
ENVIRONMENT = {
    "--job": "GAPTRAIN_JOB",
    "--role": "GAPTRAIN_ROLE",
    "--coordinator": "GAPTRAIN_COORDINATOR",
    "--token-file": "GAPTRAIN_TOKEN_FILE",
    "--http-port": "GAPTRAIN_HTTP_PORT",
    "--host-name": "GAPTRAIN_HOST_NAME",
    "--grace-seconds": "GAPTRAIN_GRACE_SECONDS",
    "--ports-file": "GAPTRAIN_PORTS_FILE",
    "--coordinator-ca": "GAPTRAIN_COORDINATOR_CA",
    "--master-ca": "GAPTRAIN_MASTER_CA",
}


class OptionsError(ValueError):
    """A bad flag, environment variable or job file; the message names it."""


class Options:
    def __init__(self):
        self.job_file = ""
        self.role = "trainer"
        self.coordinator = ""
        self.token = ""
        self.allow_no_token = False
        self.coordinator_ca = ""
        self.master_ca = ""
        self.threads = 0
        self.grace_seconds = DEFAULT_GRACE_SECONDS
        self.host_name = ""
        self.http_address = "0.0.0.0"
        self.http_port = DEFAULT_HTTP_PORT
        self.ports_file = ""
        self.data_dir = ""  # --data-dir: overrides spec.data.path
        # Read from the job file:
        self.job_name = ""
        self.wire_type = pb.FLOAT32
        self.mode = "async"
        self.rule = "gap-aware"
        self.data_path = ""  # --data-dir, else spec.data.path
        self.data_format = "mnist-idx"
        self.model = {}  # spec.model as written
        self.momentum = 0.9  # spec.training.optimizer: dana-slim's worker momentum
        self.weight_decay = 1e-4
        self.eval_every_updates = 500  # spec.training.evalEveryUpdates
        self.batch_size = 128  # spec.training.batchSize (the evaluator's default)
        # spec.training.target's metric ("accuracy" for targetAccuracy); "": none
        self.target_metric = ""


def _parser():
    p = argparse.ArgumentParser(prog="gaptrain", add_help=False)
    for flag in ("--job", "--coordinator", "--token-file", "--coordinator-ca", "--master-ca",
                 "--role", "--threads", "--grace-seconds", "--host-name", "--http-address",
                 "--http-port", "--ports-file", "--data-dir",
                 # Accepted for gaptrain-worker's command line, not used: the
                 # device and the data cache are the script's own business.
                 "--device", "--data-cache"):
        p.add_argument(flag, dest=flag[2:].replace("-", "_"), default=None)
    p.add_argument("--insecure-no-token", action="store_true")
    return p


def _get(tree, *path, default=None):
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return default
        tree = tree[key]
    return tree


def read_job(options, job_file, name="--job"):
    try:
        with open(job_file) as f:
            job = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise OptionsError("%s %s: %s" % (name, job_file, e))
    if not isinstance(job, dict):
        raise OptionsError("%s %s: not a TrainingJob" % (name, job_file))
    options.job_name = str(_get(job, "metadata", "name", default=""))
    wire = _get(job, "spec", "training", "wireType", default="fp32")
    if wire not in ("fp32", "bf16"):
        raise OptionsError("spec.training.wireType: %r is not fp32 or bf16" % (wire,))
    options.wire_type = pb.BFLOAT16 if wire == "bf16" else pb.FLOAT32
    options.mode = _get(job, "spec", "training", "mode", default="async")
    options.rule = _get(job, "spec", "training", "staleness", "rule", default="gap-aware")
    options.data_format = str(_get(job, "spec", "data", "format", default="mnist-idx"))
    options.model = _get(job, "spec", "model", default={}) or {}
    optimizer = "spec.training.optimizer."
    options.momentum = _job_number(_get(job, "spec", "training", "optimizer", "momentum",
                                        default=0.9), optimizer + "momentum", 0.0, 1.0)
    options.weight_decay = _job_number(_get(job, "spec", "training", "optimizer", "weightDecay",
                                            default=1e-4), optimizer + "weightDecay", 0.0)
    options.eval_every_updates = int(_job_number(
        _get(job, "spec", "training", "evalEveryUpdates", default=500),
        "spec.training.evalEveryUpdates", 1.0))
    options.batch_size = int(_job_number(_get(job, "spec", "training", "batchSize", default=128),
                                         "spec.training.batchSize", 1.0))
    target = _get(job, "spec", "training", "target", default=None) or {}
    options.target_metric = str(target.get("metric", "")) if isinstance(target, dict) else ""
    if not options.target_metric and _get(job, "spec", "training", "targetAccuracy", default=0):
        options.target_metric = "accuracy"
    path = _get(job, "spec", "data", "path", default="")
    options.data_path = options.data_dir or ("" if path is None else str(path))


def _job_number(value, field, low, high=None):
    """A finite number of the job file in [low, high), or >= low without
    `high` (the parser's ranges: services/api/training_job.h)."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and
          math.isfinite(value) and low <= value and (high is None or value < high))
    if not ok:
        want = "at least %g" % low if high is None else "in [%g, %g)" % (low, high)
        raise OptionsError("%s: must be a number %s, got %r" % (field, want, value))
    return float(value)


def _setting(args, environ, flag):
    """(value, name): the flag's value, else its variable's, else (None, flag)."""
    value = getattr(args, flag[2:].replace("-", "_"))
    if value is not None:
        return value, flag
    var = ENVIRONMENT.get(flag)
    if var is not None and environ.get(var, "") != "":
        return environ[var], "$" + var
    return None, flag


def _number(text, name, kind, low, high, what):
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or value != value or not low <= value <= high:
        raise OptionsError("%s: %r is not %s" % (name, text, what))
    return value


def requested_role(argv=None, environ=None):
    """"trainer" or "evaluator": what --role or $GAPTRAIN_ROLE asks of this
    process ("trainer" when neither is set), so that one script can call
    gaptrain.train() or gaptrain.evaluate() (the operator and `gaptrain
    run` set $GAPTRAIN_ROLE)."""
    environ = os.environ if environ is None else environ
    args, _ = _parser().parse_known_args(argv)
    value, _ = _setting(args, environ, "--role")
    return value or "trainer"


def parse(argv=None, environ=None, role="trainer"):
    """Options from flags (unknown ones are left to the user's script), else
    the environment ($GAPTRAIN_JOB, $GAPTRAIN_ROLE, $GAPTRAIN_COORDINATOR,
    $GAPTRAIN_TOKEN_FILE or $GAPTRAIN_TOKEN, $GAPTRAIN_HTTP_PORT,
    $GAPTRAIN_HOST_NAME or $HOSTNAME, $GAPTRAIN_GRACE_SECONDS,
    $GAPTRAIN_PORTS_FILE), and the job file. `role` is what the caller runs
    ("trainer": train(); "evaluator": evaluate()): a --role or $GAPTRAIN_ROLE
    naming the other is an error."""
    environ = os.environ if environ is None else environ
    args, _ = _parser().parse_known_args(argv)
    o = Options()
    job, job_name = _setting(args, environ, "--job")
    if not job:
        raise OptionsError("--job: required (the TrainingJob file; or $GAPTRAIN_JOB)")
    coordinator, coordinator_name = _setting(args, environ, "--coordinator")
    if not coordinator:
        raise OptionsError("--coordinator: required (HOST:PORT; or $GAPTRAIN_COORDINATOR)")
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise OptionsError("%s: must be HOST:PORT, got %r" % (coordinator_name, coordinator))
    given, role_name = _setting(args, environ, "--role")
    if given is not None and given not in ("trainer", "evaluator"):
        raise OptionsError("%s: %r is not trainer or evaluator" % (role_name, given))
    if given is not None and given != role:
        call = "gaptrain.evaluate()" if given == "evaluator" else "gaptrain.train()"
        raise OptionsError("%s: %s, but this process runs %s; call %s (gaptrain.role() says "
                           "which)" % (role_name, given, role, call))
    o.role = role
    grace, grace_name = _setting(args, environ, "--grace-seconds")
    if grace is not None:
        o.grace_seconds = _number(grace, grace_name, float, 1e-9, 86400,
                                  "a number of seconds in (0, 86400]")
    if args.threads is not None:
        o.threads = _number(args.threads, "--threads", int, 0, 1024, "an integer in [0, 1024]")
    http_port, http_port_name = _setting(args, environ, "--http-port")
    if http_port is not None:
        o.http_port = _number(http_port, http_port_name, int, 0, 65535,
                              "a port in [0, 65535] (0 picks a free one)")
    if args.http_address:
        o.http_address = args.http_address
    o.ports_file = _setting(args, environ, "--ports-file")[0] or ""
    o.data_dir = args.data_dir or ""
    o.job_file = job
    o.coordinator = coordinator
    o.allow_no_token = args.insecure_no_token
    # In a cluster the operator sets both (in-cluster TLS, docs/operator.md).
    o.coordinator_ca = _setting(args, environ, "--coordinator-ca")[0] or ""
    o.master_ca = _setting(args, environ, "--master-ca")[0] or ""
    token_file, token_file_name = _setting(args, environ, "--token-file")
    if token_file:
        try:
            with open(token_file) as f:
                o.token = f.read().strip()
        except OSError as e:
            raise OptionsError("%s %s: %s" % (token_file_name, token_file, e))
        if not o.token:
            raise OptionsError("%s %s: the file is empty" % (token_file_name, token_file))
    else:
        o.token = environ.get("GAPTRAIN_TOKEN", "").strip()
    if not o.token and not o.allow_no_token:
        raise OptionsError("--token-file: no job token (set it, $GAPTRAIN_TOKEN_FILE or "
                           "$GAPTRAIN_TOKEN)")
    o.host_name = (_setting(args, environ, "--host-name")[0] or environ.get("HOSTNAME", "") or
                   socket.gethostname())
    read_job(o, o.job_file, job_name)
    return o
