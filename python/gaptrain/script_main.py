"""A trainer or evaluator script's entry point: what every such script's
`if __name__ == "__main__":` would otherwise write again.

    def main(argv):
        options = gaptrain.parse_options(argv, role=gaptrain.role(argv))
        ...

    if __name__ == "__main__":
        gaptrain.run_main(main)

The exit codes matter to the job: under `restartPolicy: ExitCode` the
operator and `gaptrain run` replace a process that exits 128-255 (killed)
and count one that exits 1-127 as failed for good. A bad setting or a job
that cannot go on is not fixed by a restart, so both exit below 128."""

import logging
import os
import sys

from gaptrain.options import OptionsError
from gaptrain.rpc import GaptrainError

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def run_main(main, argv=None):
    """Calls main(argv) (sys.argv[1:] by default) and exits with what it
    returns (None: 0). Before, logging shows INFO (logging.basicConfig,
    which changes nothing where the script configured logging itself), so
    the trainer's progress is in the pod's log. A bad flag, environment
    variable or job file (OptionsError) exits 2, and a job the SDK cannot go
    on with (GaptrainError: the master refused the model, the job failed)
    exits 1, each with one line `SCRIPT: message` on stderr instead of a
    traceback. Any other exception propagates as Python's own (exit 1)."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "gaptrain"
    try:
        code = main(sys.argv[1:] if argv is None else argv)
    except OptionsError as e:
        print("%s: %s" % (script, e), file=sys.stderr)
        code = 2
    except GaptrainError as e:
        print("%s: %s" % (script, e), file=sys.stderr)
        code = 1
    sys.exit(code or 0)
