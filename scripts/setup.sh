#!/usr/bin/env bash
# Installs what softpart needs to build and to run its guest experiments on a
# fresh Debian 12 machine, and does nothing when it is all there already:
#   - Debian packages (QEMU, busybox, libelf, the workloads),
#   - a project-local venv with clang 22 (ziglang wheel) and libclang
#     (libclang wheel), plus a `clang` wrapper that scx_cargo accepts,
#   - the guest kernel (scripts/guest-kernel.sh).
# Versions are pinned in scripts/versions.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/versions.sh
. "$here/scripts/versions.sh"
cache=${SOFTPART_CACHE:-$here/.cache}
mkdir -p "$cache/bin"

missing=""
for pkg in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends $missing
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

bash "$here/scripts/guest-kernel.sh" >/dev/null
echo "setup: ok ($(cat "$cache/kernel/$GUEST_KERNEL_PKG/release") guest kernel, $("$wrapper" --version | head -1))"
