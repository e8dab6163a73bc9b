#!/usr/bin/env bash
# //python:python_sdk_test: the package's tests (tests/run_all.py) with
# Debian's /usr/bin/python3 (python3-torch, python3-grpcio,
# python3-protobuf, python3-yaml) against the master and coordinator
# built by Bazel. The datasets are ../shared/data next to the checkout,
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
exec /usr/bin/python3 "$ws/python/tests/run_all.py"
