#!/usr/bin/env bash
# Installs what softpart needs to build and to run its guest experiments on a
# fresh Debian 12 machine, and does nothing when it is all there already:
#   - Debian packages (QEMU, busybox, libelf, the workloads),
#   - a project-local venv with clang 22 (ziglang wheel) and libclang
#     (libclang wheel), plus a `clang` wrapper that scx_cargo accepts,
#   - the guest kernel (scripts/guest-kernel.sh).
# With --host, only what building the binaries needs (libelf, clang): for a
# host that runs softpart, not its guest tests.
# Versions are pinned in scripts/versions.sh.
set -euo pipefail

host_only=false
case "${1:-}" in
  --host) host_only=true ;;
  "") ;;
  *) echo "usage: setup.sh [--host]" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/versions.sh
. "$here/scripts/versions.sh"
cache=${SOFTPART_CACHE:-$here/.cache}
mkdir -p "$cache/bin"

packages=$BUILD_APT_PACKAGES
$host_only || packages="$packages $GUEST_APT_PACKAGES"
missing=""
for pkg in $packages; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends $missing
fi

qemu_major=$(qemu-system-x86_64 --version 2>/dev/null | sed -n 's/^QEMU emulator version \([0-9]*\).*/\1/p' || true)
if ! $host_only && [ "${qemu_major:-0}" -lt "$QEMU_MIN_MAJOR" ]; then
  # Host sources plus bookworm-backports, in a private apt configuration:
  # the host's own apt configuration is left as it is.
  echo "setup: installing QEMU >= $QEMU_MIN_MAJOR from bookworm-backports (have: ${qemu_major:-none})"
  bpo="$cache/apt-bookworm-backports"
  rm -rf "$bpo" && mkdir -p "$bpo/parts" "$bpo/lists/partial"
  cp /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list "$bpo/parts/" 2>/dev/null || true
  [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$bpo/parts/host.list"
  uri=$(cat "$bpo"/parts/* 2>/dev/null \
    | sed -nE 's/^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)(https?:[^[:space:]]+).*/\3/p' \
    | grep -E '/debian/?$' | head -1 || true)
  echo "deb ${uri:-http://deb.debian.org/debian} bookworm-backports main" >"$bpo/parts/backports.list"
  apt_bpo=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$bpo/parts" -o "Dir::State::Lists=$bpo/lists")
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get "${apt_bpo[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get "${apt_bpo[@]}" install -y -qq --no-install-recommends \
    -t bookworm-backports qemu-system-x86
  qemu_major=$(qemu-system-x86_64 --version | sed -n 's/^QEMU emulator version \([0-9]*\).*/\1/p')
  [ "${qemu_major:-0}" -ge "$QEMU_MIN_MAJOR" ] || { echo "setup: QEMU is still ${qemu_major:-missing}" >&2; exit 1; }
fi

venv="$cache/venv"
stamp="$venv/.softpart-$ZIGLANG_VERSION-$LIBCLANG_VERSION"
if [ ! -f "$stamp" ]; then
  echo "setup: creating $venv (ziglang==$ZIGLANG_VERSION libclang==$LIBCLANG_VERSION)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    "ziglang==$ZIGLANG_VERSION" "libclang==$LIBCLANG_VERSION"
  touch "$stamp"
fi

# scx_cargo probes `clang --version`; zig's raw clang driver is what speaks
# the BPF target (`zig cc` rejects --target=...-gnu).
wrapper="$cache/bin/clang"
zig="$venv/lib/python3*/site-packages/ziglang/zig"
zig=$(echo $zig)
if [ ! -x "$wrapper" ] || ! grep -qF "$zig" "$wrapper"; then
  printf '#!/bin/sh\nexec %s clang "$@"\n' "$zig" >"$wrapper"
  chmod +x "$wrapper"
fi
"$wrapper" --version | head -1 | grep -q 'clang version' || { echo "setup: $wrapper does not run" >&2; exit 1; }

if $host_only; then
  echo "setup: ok (host build: $("$wrapper" --version | head -1))"
  exit 0
fi
bash "$here/scripts/guest-kernel.sh" >/dev/null
echo "setup: ok (QEMU $qemu_major, $(cat "$cache/kernel/$GUEST_KERNEL_PKG/release") guest kernel, $("$wrapper" --version | head -1))"
