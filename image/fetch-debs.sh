#!/usr/bin/env bash
# Puts the .deb of each package named in PACKAGES_FILE (one a line) into
# DEST: apt's candidate version of exactly that package, not its
# dependencies. A file with the right name and SHA-256 already in
# CACHE_DIR or in apt's own cache (/var/cache/apt/archives) is linked (or
# copied), so only what neither holds is downloaded; downloads are kept in
# CACHE_DIR for the next build.
#
# apt's configuration comes from $APT_CONFIG as usual: mmdebstrap's hook
# passes the image's (its sources and lists), the Dockerfile's build stage
# uses the system's.
#
# Usage: image/fetch-debs.sh PACKAGES_FILE DEST [CACHE_DIR]
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 PACKAGES_FILE DEST [CACHE_DIR]" >&2
  exit 2
fi
packages_file=$1
dest=$2
cache=${3:-}
mapfile -t packages < <(grep -v '^[[:space:]]*$' "$packages_file")
if [[ ${#packages[@]} -eq 0 ]]; then
  echo "fetch-debs: $packages_file names no package" >&2
  exit 1
fi
mkdir -p "$dest"
[[ -z "$cache" ]] || mkdir -p "$cache"

# "'http://.../libc6_2.36-9%2bdeb12u14_amd64.deb' libc6_2.36-9+deb12u14_amd64.deb 2759320 SHA256:ba4f..."
if ! uris=$(apt-get download --print-uris "${packages[@]}" 2>&1); then
  echo "fetch-debs: apt cannot name the packages' files:" >&2
  echo "$uris" >&2
  exit 1
fi

declare -A want=()  # file name -> sha256
while read -r _ file _ hash; do
  want[$file]=${hash#SHA256:}
done < <(grep "^'" <<<"$uris")
if [[ ${#want[@]} -ne ${#packages[@]} ]]; then
  echo "fetch-debs: asked for ${#packages[@]} packages, apt names ${#want[@]} files" >&2
  exit 1
fi

place() {  # place SOURCE: link or copy SOURCE into DEST
  ln -f "$1" "$dest/" 2>/dev/null || cp -f "$1" "$dest/"
}

# Every cached copy, hashed in one pass.
candidates=()
for file in "${!want[@]}"; do
  for dir in "$cache" /var/cache/apt/archives; do
    [[ -n "$dir" && -f "$dir/$file" ]] && candidates+=("$dir/$file")
  done
done
declare -A found=()
if [[ ${#candidates[@]} -gt 0 ]]; then
  while read -r hash path; do
    file=${path##*/}
    if [[ -z "${found[$file]:-}" && "$hash" == "${want[$file]}" ]]; then
      place "$path"
      found[$file]=1
    fi
  done < <(sha256sum "${candidates[@]}")
fi

download=()
for file in "${!want[@]}"; do
  [[ -n "${found[$file]:-}" ]] || download+=("${file%%_*}")
done
echo "fetch-debs: ${#want[@]} packages, ${#found[@]} from caches, downloading ${#download[@]}" >&2
if [[ ${#download[@]} -gt 0 ]]; then
  # apt-get download checks each file against the lists' SHA-256.
  if ! (cd "$dest" && apt-get download -q "${download[@]}" >/dev/null); then
    echo "fetch-debs: apt-get download failed" >&2
    exit 1
  fi
  if [[ -n "$cache" ]]; then
    for file in "${!want[@]}"; do
      [[ -n "${found[$file]:-}" ]] || ln -f "$dest/$file" "$cache/" 2>/dev/null ||
        cp -f "$dest/$file" "$cache/"
    done
  fi
fi
