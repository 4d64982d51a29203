#!/usr/bin/env bash
# A Debian trixie root filesystem with systemd, udev, PostgreSQL and
# containerd (with two images for Kubernetes pods: a pause image of
# catatonit and a busybox image, built here with umoci, no registry), for
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
packages="systemd,systemd-sysv,udev,dbus,postgresql,sudo,curl,jq,procps,iproute2,util-linux,containerd,runc,umoci,catatonit,busybox-static"
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
# The images, as OCI layouts in /opt/images (imported into containerd in
# the guest): registry.k8s.io/pause:3.8, the sandbox image containerd 1.7
# names by default, is catatonit in pause mode; busybox:latest is
# busybox-static with sh.
$sudo_ chroot "$tree" /bin/sh -ec '
  mkdir -p /opt/images /tmp/bb/bin && cd /opt/images
  umoci init --layout pause && umoci new --image pause:3.8
  umoci insert --image pause:3.8 /usr/bin/catatonit /pause
  umoci config --image pause:3.8 --config.entrypoint /pause --config.entrypoint -P
  cp /bin/busybox /tmp/bb/bin/busybox && ln -s busybox /tmp/bb/bin/sh
  umoci init --layout busybox && umoci new --image busybox:latest
  umoci insert --image busybox:latest /tmp/bb/bin /bin
  umoci config --image busybox:latest --config.cmd sh
  rm -rf /tmp/bb'
# What a guest that runs from memory does not need: docs, and the shims
# and the image tool nothing uses there.
$sudo_ rm -f "$tree"/usr/bin/containerd-shim "$tree"/usr/bin/containerd-shim-runc-v1 "$tree"/usr/bin/umoci
# containerd starts when the test has configured it, not at boot.
$sudo_ rm -f "$tree"/etc/systemd/system/multi-user.target.wants/containerd.service
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
