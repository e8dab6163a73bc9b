#!/usr/bin/env bash
# //python:python_sdk_test: the package's tests (tests/run_all.py) with
# Debian's /usr/bin/python3 (python3-torch, python3-grpcio,
# python3-protobuf, python3-yaml) against the master and coordinator
# built by Bazel. With the argument `current` (//python:
# python_sdk_current_torch_test), the same tests with the python of the
# virtual environment of today's PyTorch from PyPI that
# scripts/python-venv.sh makes, named by $GAPTRAIN_CURRENT_TORCH_PYTHON
# (scripts/test.sh sets it); without it the tests are reported skipped, and
# fail when CI=true. The datasets are ../shared/data next to the checkout,
# found through the runfiles link of the workspace's README.md
# ($GAPTRAIN_DATA_DIR wins, as for the C++ tests).
set -euo pipefail
ws="$TEST_SRCDIR/$TEST_WORKSPACE"
if [[ -z "${GAPTRAIN_DATA_DIR:-}" ]]; then
  repo="$(dirname "$(readlink -f "$ws/README.md")")"
  export GAPTRAIN_DATA_DIR="$repo/../shared/data"
fi
export GAPTRAIN_MASTER_BIN="$ws/services/master/gaptrain-master"
export GAPTRAIN_COORDINATOR_BIN="$ws/services/coordinator/gaptrain-coordinator"
export PYTHONDONTWRITEBYTECODE=1
python=/usr/bin/python3
if [[ "${1:-}" == current ]]; then
  python="${GAPTRAIN_CURRENT_TORCH_PYTHON:-}"
  if [[ -z "$python" || ! -x "$python" ]]; then
    why="no virtual environment of today's PyTorch (\$GAPTRAIN_CURRENT_TORCH_PYTHON is '$python'; scripts/python-venv.sh makes it, scripts/test.sh sets it)"
    if [[ "${CI:-}" == true ]]; then
      echo "python_sdk_current_torch_test: $why" >&2
      exit 1
    fi
    exec /usr/bin/python3 "$ws/python/tests/run_all.py" --skip-all "$why"
  fi
fi
exec "$python" "$ws/python/tests/run_all.py"
