#!/usr/bin/env bash
# Prints, one a line and sorted, the Debian packages that hold the shared
# libraries BINARY... load: every path in their `ldd` closure, owned per
# `dpkg-query -S` (through symlinks such as the libblas.so.3 alternative,
# which resolves to OpenBLAS). These are the image's runtime packages.
#
# Fails, naming the library, when a binary misses a library on this machine
# or loads one that no package owns (a Bazel _solib_ object: cc_binary links
# the project's own libraries statically, linkstatic being its default).
#
# Usage: image/runtime-packages.sh BINARY...
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi

# "libfoo1:amd64, libfoo-dev:amd64: /usr/lib/.../libfoo.so.1" -> "/usr/lib/.../libfoo.so.1 libfoo1"
# for each PATH that a package owns (one dpkg-query for all: each call reads
# the whole package database).
owners() {
  { dpkg-query -S "$@" 2>/dev/null || true; } |
    sed -n -E 's/^([^:, ]+)[^ ]*(, [^ ]+)*: (\/.*)$/\3 \1/p'
}

libraries=()
for binary in "$@"; do
  if [[ ! -x "$binary" ]]; then
    echo "runtime-packages: $binary: not an executable file" >&2
    exit 1
  fi
  closure=$(ldd "$binary") || {
    echo "runtime-packages: ldd $binary failed" >&2
    exit 1
  }
  if missing=$(grep 'not found' <<<"$closure"); then
    echo "runtime-packages: $binary misses libraries on this machine:" >&2
    echo "$missing" >&2
    exit 1
  fi
  # "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" and
  # "\t/lib64/ld-linux-x86-64.so.2 (0x...)"; the vDSO has no path.
  while read -r path; do
    libraries+=("$path")
  done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$closure")
done

mapfile -t libraries < <(printf '%s\n' "${libraries[@]}" | sort -u)
declare -A owner=()
while read -r path package; do
  owner[$path]=$package
done < <(owners "${libraries[@]}")

# Not owned as named: a symlink dpkg does not know (an alternative, or the
# /lib -> /usr/lib merge); its target is.
unowned=()
for library in "${libraries[@]}"; do
  [[ -n "${owner[$library]:-}" ]] || unowned+=("$library")
done
if [[ ${#unowned[@]} -gt 0 ]]; then
  declare -A target=()
  mapfile -t targets < <(readlink -f "${unowned[@]}")
  for i in "${!unowned[@]}"; do
    target[${unowned[$i]}]=${targets[$i]}
  done
  while read -r path package; do
    owner[$path]=$package
  done < <(owners "${target[@]}")
  for library in "${unowned[@]}"; do
    package=${owner[${target[$library]}]:-}
    if [[ -z "$package" ]]; then
      echo "runtime-packages: $library belongs to no Debian package; link it" \
        "statically (cc_binary's linkstatic) or package it" >&2
      exit 1
    fi
    owner[$library]=$package
  done
fi

for library in "${libraries[@]}"; do
  echo "${owner[$library]}"
done | sort -u
