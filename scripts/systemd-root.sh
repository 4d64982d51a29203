#!/usr/bin/env bash
# A Debian trixie root filesystem with systemd, udev and PostgreSQL, for
# the systemd guest test: debootstrapped once into the cache (about 40 s
# here), booted as the guest's initramfs with systemd as PID 1
# (rdinit=/lib/systemd/systemd), so the guest needs no disk image and no
# kernel modules. Prints the tree's path.
#
# Usage: scripts/systemd-root.sh
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cache=${SOFTPART_CACHE:-$here/.cache}
packages="systemd,systemd-sysv,udev,dbus,postgresql,curl,procps,iproute2,util-linux"
key=$(echo "trixie $packages" | sha256sum | cut -c1-12)
tree="$cache/systemd-root/$key"
if [ -f "$tree/.complete" ]; then
  echo "$tree"
  exit 0
fi
command -v debootstrap >/dev/null || {
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends debootstrap
}
rm -rf "$tree" && mkdir -p "$(dirname "$tree")"
debootstrap --variant=minbase --include="$packages" trixie "$tree" http://deb.debian.org/debian >&2
# What a guest that runs from memory does not need.
rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/* \
  "$tree"/usr/share/doc/* "$tree"/usr/share/man/* "$tree"/usr/share/locale/*
touch "$tree/.complete"
echo "$tree"
