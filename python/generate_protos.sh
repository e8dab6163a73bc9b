#!/usr/bin/env bash
# Writes gaptrain/_proto/gaptrain_pb2.py and gaptrain_pb2_grpc.py from
# ../proto/gaptrain.proto with Debian's protoc and grpc_python_plugin
# (protobuf-compiler, protobuf-compiler-grpc). The generated files are
# committed, so installing or importing the package needs neither tool;
# tests/test_generated_protos.py checks that they are up to date.
#   python/generate_protos.sh [OUT_DIR]   (default: python/gaptrain/_proto)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/gaptrain/_proto}"
protoc="${PROTOC:-protoc}"
plugin="${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin)}"
mkdir -p "$out"
"$protoc" -I "$here/../proto" --python_out="$out" \
  --grpc_python_out="$out" --plugin=protoc-gen-grpc_python="$plugin" \
  "$here/../proto/gaptrain.proto"
# The plugin imports its messages as a top-level module; inside the package
# the import is relative.
sed -i 's/^import gaptrain_pb2 as gaptrain__pb2$/from . import gaptrain_pb2 as gaptrain__pb2/' \
  "$out/gaptrain_pb2_grpc.py"
