#!/bin/sh
# Turns a Debian 12 root file system into the base of gaptrain's image, run
# as root from inside it (mmdebstrap's customize hook chroots into it; the
# Dockerfile's runtime stage RUNs it). Both images get their layout here:
#   - the .debs in DEBS_DIR installed, without the rest of their
#     dependency tree: Debian's LibTorch depends on OpenCV, FFmpeg, GDAL and
#     Qt, which pull in Mesa's LLVM, Perl and data packages that nothing
#     loads (image/fetch-debs.sh fetches exactly the packages that own a
#     library the binaries load; dpkg records the rest as unmet);
#   - no documentation, manual pages or translations (copyright files stay),
#     now and for any later dpkg run;
#   - the user and group gaptrain, uid and gid 65532, home /var/lib/gaptrain;
#   - the directories the operator's pods use: /etc/gaptrain (the job's
#     ConfigMap), /var/run/gaptrain (the token Secret), both root's and
#     read-only in a pod, and /var/lib/gaptrain/{checkpoints,coordinator}
#     (the PVCs), gaptrain's.
# Needs dpkg, useradd and groupadd (passwd), and adduser for some packages'
# maintainer scripts (libibverbs1 adds a group). POSIX sh: the base may have
# no bash.
#
# Usage: rootfs-setup.sh DEBS_DIR
set -eu

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 DEBS_DIR" >&2
  exit 2
fi
debs=$1
uid=65532

cat > /etc/dpkg/dpkg.cfg.d/gaptrain-slim <<'EOF'
# gaptrain's image: no documentation, manual pages or translations.
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/share/lintian/*
path-exclude=/usr/share/bash-completion/*
EOF
find /usr/share/doc -mindepth 1 -not -type d -not -name copyright -delete 2>/dev/null || true
find /usr/share/doc -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/share/lintian/* \
  /usr/share/bash-completion/*

# Packages already installed at the same version are skipped: apt's file
# names are NAME_VERSION_ARCH.deb, with an epoch's ':' written %3a.
installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n' | sed -n 's/^ii  *//p')
set --
for deb in "$debs"/*.deb; do
  [ -e "$deb" ] || continue
  file=${deb##*/}
  name=${file%%_*}
  version=$(echo "$file" | sed -e 's/^[^_]*_//' -e 's/_[^_]*$//' -e 's/%3a/:/g')
  if ! printf '%s\n' "$installed" | grep -qxF "$name $version"; then
    set -- "$@" "$deb"
  fi
done
if [ $# -gt 0 ]; then
  echo "rootfs-setup: installing $# packages" >&2
  # --force-depends: configure them although the dependencies nothing loads
  # are absent; dpkg prints a warning per package, kept out of the log.
  dpkg --install --force-depends --force-unsafe-io "$@" > /var/log/gaptrain-dpkg.log 2>&1 || {
    cat /var/log/gaptrain-dpkg.log >&2
    exit 1
  }
fi

if ! getent group gaptrain >/dev/null; then
  groupadd --system --gid "$uid" gaptrain
fi
if ! getent passwd gaptrain >/dev/null; then
  useradd --system --uid "$uid" --gid "$uid" --home-dir /var/lib/gaptrain --no-create-home \
    --shell /usr/sbin/nologin gaptrain
fi

install -d -m 0755 -o root -g root /etc/gaptrain /var/run/gaptrain
install -d -m 0755 -o "$uid" -g "$uid" /var/lib/gaptrain \
  /var/lib/gaptrain/checkpoints /var/lib/gaptrain/coordinator

# No set-user-ID or set-group-ID programs (su, mount, GStreamer's PTP
# helper...): nothing in the image may gain privileges.
find / -xdev -type f -perm /6000 -exec chmod ug-s {} +

# Logs and backups of the installation.
rm -rf /var/log/gaptrain-dpkg.log /var/log/dpkg.log /var/log/alternatives.log \
  /var/log/apt /var/cache/debconf/*-old /var/lib/dpkg/*-old
