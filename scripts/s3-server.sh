#!/usr/bin/env bash
# Builds the S3-compatible server the data tests read objects from (a real
# server and a real client, boto3: no mocking library), and prints its
# path:
#
#   export GAPTRAIN_RCLONE="$(scripts/s3-server.sh)"
#
# The server is rclone's `serve s3` (rclone serves a directory as buckets:
# each top-level folder is one), built with `go install` from the Go module
# proxy at the pinned version below into a cache directory. Built once
# (about 3 minutes on 2 cores), then checked in a second.
#
# Usage: scripts/s3-server.sh [--installed]
#   --installed   build nothing: print the path when it is there at the
#                 pinned version, else say why not, exit 1.
# Directory: $GAPTRAIN_TOOLS_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/gaptrain-tools.
set -euo pipefail

readonly RCLONE_VERSION=v1.76.0

source "$(dirname "${BASH_SOURCE[0]}")/cached_tool.sh"
parse_installed_flag s3-server "$@"
dir="${GAPTRAIN_TOOLS_DIR:-$(cache_dir gaptrain-tools)}"
rclone="$dir/bin/rclone"

current() {
  [[ -x "$rclone" ]] || return 1
  local output first
  # Read whole: `| head -1` could end rclone with SIGPIPE mid-output, which
  # pipefail counts as a failure (one call in five here).
  output="$("$rclone" version 2>/dev/null)" || return 1
  first="${output%%$'\n'*}"
  [[ "$first" == "rclone $RCLONE_VERSION" || "$first" == "rclone $RCLONE_VERSION-DEV" ]]
}

if current; then
  echo "$rclone"
  exit 0
fi
if [[ $build == 0 ]]; then
  echo "s3-server: no rclone $RCLONE_VERSION at $rclone (scripts/s3-server.sh builds it)" >&2
  exit 1
fi
if ! command -v go >/dev/null; then
  echo "s3-server: needs Go (the go command) to build rclone $RCLONE_VERSION" >&2
  exit 1
fi
mkdir -p "$dir/bin"
echo "s3-server: building rclone $RCLONE_VERSION into $dir/bin (about 3 minutes)" >&2
GOBIN="$dir/bin" go install "github.com/rclone/rclone@$RCLONE_VERSION" >&2
if ! current; then
  echo "s3-server: $rclone does not report rclone $RCLONE_VERSION" >&2
  exit 1
fi
echo "$rclone"
