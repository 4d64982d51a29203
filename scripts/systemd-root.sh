#!/usr/bin/env bash
# A Debian trixie root filesystem with systemd, udev and PostgreSQL, for
# the systemd guest test (scripts/systemd-test.sh): debootstrapped once
# into the cache (about a minute), packed as an uncompressed newc cpio the
# guest boots as its initramfs with systemd as PID 1
# (rdinit=/lib/systemd/systemd), so it needs no disk image and no kernel
# modules. Prints the cpio's path.
#
# Usage: scripts/systemd-root.sh
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cache=${SOFTPART_CACHE:-$here/.cache}
packages="systemd,systemd-sysv,udev,dbus,postgresql,sudo,curl,jq,procps,iproute2,util-linux"
# A new package list or a change here builds the root again.
key=$(cat "$0" | sha256sum | cut -c1-12)
dir="$cache/systemd-root/$key"
if [ -f "$dir/.complete" ]; then
  echo "$dir/root.cpio"
  exit 0
fi
# shellcheck source=scripts/debian-mirror.sh
. "$here/scripts/debian-mirror.sh"
sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
command -v debootstrap >/dev/null || \
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends debootstrap cpio
# Roots an earlier version of this script built.
$sudo_ rm -rf "$cache/systemd-root" && mkdir -p "$dir"
tree="$dir/tree"
$sudo_ debootstrap --variant=minbase --include="$packages" trixie "$tree" "$(debian_mirror)" >&2
# What a guest that runs from memory does not need.
$sudo_ rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/* \
  "$tree"/usr/share/doc/* "$tree"/usr/share/man/* "$tree"/usr/share/locale/*
# No root password (the console is the test's), a name for the machine.
$sudo_ sed -i 's/^root:[^:]*:/root::/' "$tree/etc/shadow"
echo softpart-guest | $sudo_ tee "$tree/etc/hostname" >/dev/null
echo "127.0.1.1 softpart-guest" | $sudo_ tee -a "$tree/etc/hosts" >/dev/null
(cd "$tree" && $sudo_ find . -path ./root.cpio -prune -o -print | $sudo_ cpio -o -H newc --quiet) > "$dir/root.cpio"
$sudo_ rm -rf "$tree"
touch "$dir/.complete"
echo "$dir/root.cpio"
