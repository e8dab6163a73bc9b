#!/usr/bin/env bash
# Makes the virtual environment with today's PyTorch that the Python SDK is
# tested with beside Debian's python3-torch 1.13, and prints its python:
#
#   export GAPTRAIN_CURRENT_TORCH_PYTHON="$(scripts/python-venv.sh)"
#
# The environment is Debian's /usr/bin/python3 with python/requirements-
# current.txt installed from PyPI (torch and torchvision, with the CUDA
# libraries PyPI's Linux wheels depend on, grpcio, protobuf, PyYAML); the
# SDK itself is not installed: the tests put the checkout's python/ first
# on the path. Made once (about 2 minutes: 4 GB of wheels), then checked in
# a second: remade when the requirements file changed, or when the
# environment no longer imports the versions it pins.
#
# Usage: scripts/python-venv.sh [--installed]
#   --installed   make nothing: print the python when the environment is
#                 there and current, else say why not, exit 1.
# Directory: $GAPTRAIN_PYTHON_VENV_DIR, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/gaptrain-python-current. Needs
# python3-venv (scripts/bootstrap.sh) and PyPI.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$here/../python/requirements-current.txt"

source "$(dirname "${BASH_SOURCE[0]}")/cached_tool.sh"
parse_installed_flag python-venv "$@"
dir="${GAPTRAIN_PYTHON_VENV_DIR:-$(cache_dir gaptrain-python-current)}"
python="$dir/bin/python3"
stamp="$dir/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"

# The environment imports what the requirements pin.
current() {
  [[ -x "$python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
  "$python" - "$requirements" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, pinned = line.split("==")
        if version(name) != pinned:
            sys.exit("%s %s, not %s" % (name, version(name), pinned))
import grpc, torch, torchvision, yaml  # noqa: E401,F401
from google.protobuf import descriptor_pool  # noqa: F401
PY
}

if current; then
  echo "$python"
  exit 0
fi
if [[ $build -eq 0 ]]; then
  echo "python-venv: no current environment in $dir (run scripts/python-venv.sh)" >&2
  exit 1
fi
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  echo "python-venv: Debian's python3-venv is missing (scripts/bootstrap.sh installs it)" >&2
  exit 1
fi

mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if current; then  # made by another caller meanwhile
  echo "$python"
  exit 0
fi
echo "python-venv: making $dir from $(basename "$requirements")" >&2
rm -rf "$dir"
/usr/bin/python3 -m venv "$dir"
"$python" -m pip install --quiet --disable-pip-version-check --no-input \
  --requirement "$requirements" >&2
echo "$want" >"$stamp"
if ! current; then
  echo "python-venv: $dir does not import what $(basename "$requirements") pins" >&2
  exit 1
fi
"$python" -c 'import torch, torchvision, grpc; print("python-venv: torch", torch.__version__,
  "torchvision", torchvision.__version__, "grpcio", grpc.__version__)' >&2
echo "$python"
