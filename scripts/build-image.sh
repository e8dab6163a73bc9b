#!/usr/bin/env bash
# Builds gaptrain's container image archive in one command, without a
# container runtime (docs/image.md): installs what it needs from Debian,
# builds //image:binaries with -c opt, and packs them with image/assemble.sh
# on a minimal Debian 12 root file system. The archive is an OCI image
# layout and a docker-archive at once: `docker load -i`, `podman load -i`,
# `ctr images import` and `kind load image-archive` take it.
#
# Needs root (mmdebstrap chroots) and Debian's apt mirror for the first
# build; the base layer is then cached (image/assemble.sh) and later builds
# take well under a minute beyond Bazel's.
#
# Usage: scripts/build-image.sh [--output FILE] [--tag NAME:TAG]
#          [--rebuild-base] [--check]
#   --output        [dist/gaptrain-image-0.1.0.tar]
#   --tag           [ghcr.io/gaptrain/gaptrain:0.1.0]
#   --rebuild-base  rebuild the cached Debian base (e.g. for security updates)
#   --check         then run //image:image_test with the -c opt builds
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.1.0
output=dist/gaptrain-image-$version.tar
ref=ghcr.io/gaptrain/gaptrain:$version
assemble_flags=()
check=
while [[ $# -gt 0 ]]; do
  case $1 in
    --output) output=${2:?--output needs a file}; shift 2 ;;
    --tag) ref=${2:?--tag needs NAME:TAG}; shift 2 ;;
    --rebuild-base) assemble_flags+=(--rebuild-base); shift ;;
    --check) check=1; shift ;;
    -h|--help) sed -n '/^# Usage:/,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "build-image: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

if [[ $(id -u) -ne 0 ]]; then
  echo "build-image: needs root (mmdebstrap's root mode chroots); run it with sudo" >&2
  exit 1
fi

start=$SECONDS
scripts/bootstrap.sh --image

t0=$SECONDS
if ! bazel build -c opt //image:binaries //image:binaries_list 2>&1 |
  { grep -v linux-sandbox || true; }; then
  echo "build-image: bazel build -c opt //image:binaries failed" >&2
  exit 1
fi
bazel_bin=$(bazel info -c opt bazel-bin 2>/dev/null)
build_seconds=$((SECONDS - t0))
# binaries.txt names them as runfiles paths, relative to bazel-bin.
mapfile -t binaries < <(sed "s#^#$bazel_bin/#" "$bazel_bin/image/binaries.txt")

# Reproducible from the commit: its time and hash, when this is a checkout.
labels=(--label "org.opencontainers.image.version=$version"
        --label "org.opencontainers.image.source=https://github.com/gaptrain/gaptrain")
created=()
if revision=$(git rev-parse HEAD 2>/dev/null); then
  labels+=(--label "org.opencontainers.image.revision=$revision")
  created=(--created "$(git log -1 --format=%ct HEAD)")
fi

t0=$SECONDS
# TMPDIR=/tmp: apt's sandbox user must reach mmdebstrap's temporary root.
TMPDIR=/tmp image/assemble.sh --output "$output" --tag "$ref" "${labels[@]}" "${created[@]}" \
  "${assemble_flags[@]}" "${binaries[@]}"
echo "build-image: $output ($ref): bazel ${build_seconds}s, image $((SECONDS - t0))s," \
  "$((SECONDS - start))s in all" >&2

if [[ -n "$check" ]]; then
  # The test assembles its own archive from the same -c opt builds and the
  # cached base, then runs every binary inside it.
  bazel test -c opt //image:image_test --test_output=all 2>&1 | { grep -v linux-sandbox || true; }
fi
