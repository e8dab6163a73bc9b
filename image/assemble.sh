#!/usr/bin/env bash
# Builds gaptrain's container image from BINARY... (scripts/build-image.sh
# passes the -c opt builds of //image:binaries) as one tar that is at the same
# time an OCI image layout (oci-layout, index.json, blobs/sha256/...) and a
# docker-archive (manifest.json), the layout `docker save` writes since
# Docker 25: `docker load` (old and new), `podman load`, `ctr images import`
# and `kind load image-archive` all accept it. No container runtime runs.
#
# Two layers:
#   1. the base: Debian 12 (mmdebstrap --variant=essential) plus the
#      packages that own the libraries the binaries load
#      (image/runtime-packages.sh), set up by image/rootfs-setup.sh: user
#      gaptrain (65532), the pods' directories, no documentation. It is
#      built once per package set and cached under CACHE_DIR, keyed by the
#      packages, their versions on this machine and the scripts making it;
#   2. the binaries, in /usr/local/bin.
# The config runs as 65532:65532 (numeric, so Kubernetes' runAsNonRoot can
# check it), has no entrypoint (the pods give commands) and the default
# command `gaptrain --help`.
#
# Needs root (mmdebstrap's root mode chroots) and Debian's apt mirror (or
# the .debs in /var/cache/apt/archives or CACHE_DIR/debs).
#
# Usage: image/assemble.sh --output FILE [--tag NAME:TAG] [--cache-dir DIR]
#          [--label KEY=VALUE]... [--created UNIX_SECONDS] [--rebuild-base]
#          BINARY...
#   --tag          the image reference [gaptrain:dev]
#   --cache-dir    [${XDG_CACHE_HOME:-$HOME/.cache}/gaptrain-image]
#   --label        a config label (OCI annotation keys, e.g.
#                  org.opencontainers.image.revision=...); repeatable
#   --created      the image's creation time [now]
#   --rebuild-base ignore the cached base (e.g. to pick up Debian's
#                  security updates)
set -euo pipefail

image_dir=$(cd "$(dirname "$0")" && pwd)
suite=bookworm
mirrors=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)
uid=65532
path_env=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# OpenBLAS starts no thread pool as LibTorch loads; the services size it
# themselves (services/base/blas_environment.h).
blas_env=OPENBLAS_NUM_THREADS=1

usage() {
  sed -n 's/^# \{0,1\}//; /^Usage:/,/^set /p' "$0" | sed '$d' >&2
  exit 2
}

output=
ref=gaptrain:dev
cache=
labels=()
created=$(date +%s)
rebuild_base=
while [[ $# -gt 0 ]]; do
  case $1 in
    --output) output=${2:?--output needs a file}; shift 2 ;;
    --tag) ref=${2:?--tag needs NAME:TAG}; shift 2 ;;
    --cache-dir) cache=${2:?--cache-dir needs a directory}; shift 2 ;;
    --label) labels+=("${2:?--label needs KEY=VALUE}"); shift 2 ;;
    --created) created=${2:?--created needs UNIX_SECONDS}; shift 2 ;;
    --rebuild-base) rebuild_base=1; shift ;;
    --help|-h) usage ;;
    --) shift; break ;;
    -*) echo "assemble: unknown flag '$1'" >&2; usage ;;
    *) break ;;
  esac
done
binaries=("$@")
[[ -n "$output" && ${#binaries[@]} -gt 0 ]] || usage
if [[ -z "$cache" ]]; then
  [[ -n "${XDG_CACHE_HOME:-}${HOME:-}" ]] || {
    echo "assemble: neither HOME nor XDG_CACHE_HOME is set; pass --cache-dir" >&2
    exit 2
  }
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/gaptrain-image
fi

fail() {
  echo "assemble: $*" >&2
  exit 1
}

# The reference: NAME:TAG, NAME possibly with a registry. Docker keeps it as
# given; containerd wants it fully qualified (docker.io/library/NAME:TAG).
[[ "$ref" =~ ^([a-z0-9][a-z0-9._/:-]*[a-z0-9]|[a-z0-9]):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$ ]] ||
  fail "--tag '$ref': want NAME:TAG (lowercase name, tag of letters, digits, '_', '.', '-')"
name=${BASH_REMATCH[1]}
tag=${BASH_REMATCH[2]}
first=${name%%/*}
if [[ "$name" != */* ]]; then
  full_name=docker.io/library/$name
elif [[ "$first" == *.* || "$first" == *:* || "$first" == localhost ]]; then
  full_name=$name
else
  full_name=docker.io/$name
fi
[[ "$created" =~ ^[0-9]+$ ]] || fail "--created '$created': want seconds since the epoch"
created_rfc3339=$(date -u -d "@$created" +%Y-%m-%dT%H:%M:%SZ)
for label in "${labels[@]}"; do
  [[ "$label" == ?*=* ]] || fail "--label '$label': want KEY=VALUE"
done

[[ $(id -u) -eq 0 ]] || fail "needs root (mmdebstrap's root mode, chroot); run it with sudo"
for tool in mmdebstrap umoci jq ldd dpkg-query apt-get sha256sum tar; do
  command -v "$tool" >/dev/null ||
    fail "'$tool' is missing: scripts/bootstrap.sh --image installs it"
done
names=()
for binary in "${binaries[@]}"; do
  [[ -f "$binary" && -x "$binary" ]] || fail "$binary: not an executable file"
  names+=("$(basename "$binary")")
done
if dup=$(printf '%s\n' "${names[@]}" | sort | uniq -d | head -n1) && [[ -n "$dup" ]]; then
  fail "two binaries are named $dup"
fi

mkdir -p "$cache/debs"
work=$(mktemp -d "${TMPDIR:-/tmp}/gaptrain-image.XXXXXX")
# An interrupted mmdebstrap leaves /proc, /sys and /dev mounted in the root:
# unmount them (deepest first) before removing, and never cross a mount.
cleanup() {
  awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r |
    xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$SECONDS
"$image_dir/runtime-packages.sh" "${binaries[@]}" > "$work/packages.txt"
package_count=$(wc -l < "$work/packages.txt")

# The base: mmdebstrap's essential variant with /usr merged by its hook
# (else apt satisfies init-system-helpers with usrmerge, which pulls in
# Perl), plus adduser for maintainer scripts. Essential packages come from
# apt's cache or ours where
# they are there (linked in before apt looks; kept with
# --skip=essential/unlink and removed by mmdebstrap's cleanup); the hook
# keeps what apt downloaded, fetches the runtime packages and runs
# rootfs-setup.sh inside the root. /run keeps rootfs-setup.sh's directory.
mmdebstrap_args=(
  --variant=essential --include=adduser --mode=root --format=directory
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --skip=essential/unlink --skip=cleanup/run
  --setup-hook='mkdir -p "$1/var/cache/apt/archives" &&
    for d in /var/cache/apt/archives "$GAPTRAIN_CACHE/debs"; do
      find "$d" -maxdepth 1 -name "*.deb" -exec ln -f -t "$1/var/cache/apt/archives/" {} + 2>/dev/null ||
        find "$d" -maxdepth 1 -name "*.deb" -exec cp -f -t "$1/var/cache/apt/archives/" {} +;
    done'
  --customize-hook='set -e
    for f in "$1"/var/cache/apt/archives/*.deb; do
      [ -e "/var/cache/apt/archives/${f##*/}" ] || ln -f "$f" "$GAPTRAIN_CACHE/debs/" 2>/dev/null ||
        cp -f "$f" "$GAPTRAIN_CACHE/debs/"
    done
    APT_CONFIG=$MMDEBSTRAP_APT_CONFIG "$GAPTRAIN_IMAGE_DIR/fetch-debs.sh" \
      "$GAPTRAIN_PACKAGES" "$1/tmp/gaptrain-debs" "$GAPTRAIN_CACHE/debs"
    cp "$GAPTRAIN_IMAGE_DIR/rootfs-setup.sh" "$1/tmp/gaptrain-rootfs-setup.sh"
    chroot "$1" /bin/sh /tmp/gaptrain-rootfs-setup.sh /tmp/gaptrain-debs
    rm -rf "$1/tmp/gaptrain-debs" "$1/tmp/gaptrain-rootfs-setup.sh"'
  "$suite"
)

# The base's key: everything that goes into it.
key=$({
  echo "gaptrain-image base v2"
  printf '%s\n' "${mmdebstrap_args[@]}" "${mirrors[@]}"
  xargs -a "$work/packages.txt" dpkg-query -W -f='${Package} ${Version}\n'
  cat "$image_dir/fetch-debs.sh" "$image_dir/rootfs-setup.sh"
} | sha256sum | cut -c1-16)
base=$cache/base-$key

build_base() {
  local tmp=$base.tmp
  rm -rf "$tmp"
  mkdir -p "$tmp"
  cp "$work/packages.txt" "$tmp/packages.txt"
  echo "assemble: building the base (Debian $suite + $package_count runtime packages;" \
    "log: $base/mmdebstrap.log)" >&2
  local t0=$SECONDS
  if ! GAPTRAIN_PACKAGES=$work/packages.txt GAPTRAIN_CACHE=$cache GAPTRAIN_IMAGE_DIR=$image_dir \
    mmdebstrap "${mmdebstrap_args[@]}" "$work/root" "${mirrors[@]}" > "$tmp/mmdebstrap.log" 2>&1 9>&-
  then
    tail -n 30 "$tmp/mmdebstrap.log" >&2
    fail "mmdebstrap failed; the whole log: $tmp/mmdebstrap.log"
  fi
  echo "assemble: mmdebstrap took $((SECONDS - t0))s" >&2
  # No device nodes: the runtime gives /dev, and a rootless unpacker
  # cannot create them.
  du -sb --apparent-size --exclude=./dev "$work/root" | cut -f1 > "$tmp/unpacked-bytes"
  umoci init --layout "$tmp/oci"
  umoci new --image "$tmp/oci:base"
  tar --create --directory "$work/root" --sort=name --format=posix --numeric-owner \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --exclude='./dev/?*' . |
    umoci raw add-layer --image "$tmp/oci:base" \
      --history.created "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
      --history.created_by "image/assemble.sh: mmdebstrap --variant=essential $suite + $package_count runtime packages (image/rootfs-setup.sh)" \
      /dev/stdin
  rm -rf "$work/root"
  echo "$((SECONDS - t0))" > "$tmp/build-seconds"
  rm -rf "$base"
  mv "$tmp" "$base"
  # Older bases are of no further use.
  find "$cache" -maxdepth 1 -name 'base-*' -not -name "base-$key" -exec rm -rf {} +
}

# One build at a time per cache (the test and scripts/build-image.sh may
# share one). mmdebstrap must not inherit fd 9: it passes the next free
# descriptor to dash, which reads only one digit.
exec 9> "$cache/.lock"
flock 9
if [[ -n "$rebuild_base" || ! -f "$base/build-seconds" ]]; then
  build_base
else
  echo "assemble: reusing the base $base (built in $(cat "$base/build-seconds")s)" >&2
fi

# The image: a copy of the base's layout (blobs linked: umoci writes new
# blobs and never changes one), the binaries' layer, the config.
oci=$work/oci
mkdir -p "$oci/blobs/sha256"
cp "$base/oci/oci-layout" "$base/oci/index.json" "$oci/"
ln -f "$base"/oci/blobs/sha256/* "$oci/blobs/sha256/" 2>/dev/null ||
  cp -f "$base"/oci/blobs/sha256/* "$oci/blobs/sha256/"

mkdir -p "$work/app/usr/local/bin"
cp "${binaries[@]}" "$work/app/usr/local/bin/"
chmod 0755 "$work/app/usr/local/bin/"*
tar --create --file "$work/app.tar" --directory "$work/app" --no-recursion --format=posix \
  --owner=0 --group=0 --numeric-owner --mtime="@$created" \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  ./usr/local/bin "${names[@]/#/./usr/local/bin/}"
umoci raw add-layer --image "$oci:base" --tag "$tag" \
  --history.created "$created_rfc3339" \
  --history.created_by "image/assemble.sh: /usr/local/bin/{$(IFS=,; echo "${names[*]}")}" \
  "$work/app.tar"
config_args=(
  --config.user "$uid:$uid"
  --config.env "PATH=$path_env"
  --config.env "$blas_env"
  --config.workingdir /var/lib/gaptrain
  --clear config.entrypoint --clear config.cmd
  --config.cmd gaptrain --config.cmd --help
  --created "$created_rfc3339"
  --author gaptrain
  --no-history
)
for label in "${labels[@]}"; do
  config_args+=(--config.label "$label")
done
umoci config --image "$oci:$tag" "${config_args[@]}"
umoci remove --image "$oci:base"
umoci gc --layout "$oci"

# Names for the loaders: containerd and kind read the annotations of
# index.json, Docker and podman manifest.json.
manifest=$(jq -r '.manifests[0].digest' "$oci/index.json")
blob() { echo "$oci/blobs/sha256/${1#sha256:}"; }
jq --arg name "$full_name:$tag" --arg tag "$tag" \
  '.manifests[0].annotations = {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": $tag}' \
  "$oci/index.json" > "$work/index.json"
mv "$work/index.json" "$oci/index.json"
jq --arg ref "$ref" \
  '[{Config: ("blobs/sha256/" + (.config.digest | ltrimstr("sha256:"))), RepoTags: [$ref],
     Layers: [.layers[].digest | "blobs/sha256/" + ltrimstr("sha256:")]}]' \
  "$(blob "$manifest")" > "$oci/manifest.json"

mkdir -p "$(dirname "$output")"
tar --create --file "$output.tmp" --directory "$oci" --sort=name --format=ustar \
  --owner=0 --group=0 --numeric-owner --mode=a+rX --mtime="@$created" \
  oci-layout index.json manifest.json blobs
mv "$output.tmp" "$output"

# What was built.
compressed=$(jq '[.layers[].size] | add' "$(blob "$manifest")")
base_size=$(cat "$base/unpacked-bytes")
app_size=$(stat -c %s "$work/app.tar")
mib() { awk -v b="$1" 'BEGIN {printf "%.0f MiB", b / 1048576}'; }
echo "assemble: $output ($ref, manifest $manifest) in $((SECONDS - start))s" >&2
echo "  archive $(mib "$(stat -c %s "$output")"); layers $(mib "$compressed") compressed," \
  "$(mib $((base_size + app_size))) unpacked: base $(mib "$base_size")" \
  "(Debian $suite essential + $package_count runtime packages), binaries $(mib "$app_size")" >&2
