#!/usr/bin/env bash
# Fetches the guest kernel (a Debian trixie-backports build with sched_ext)
# into the cache without touching the host's apt configuration, and checks
# that its config has what softpart needs.
#
# Usage: scripts/guest-kernel.sh            # prints the cached vmlinuz path
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/versions.sh
. "$here/scripts/versions.sh"

cache=${SOFTPART_CACHE:-$here/.cache}
dest="$cache/kernel/$GUEST_KERNEL_PKG"
if [ -f "$dest/vmlinuz" ] && [ -f "$dest/config" ]; then
  echo "$dest"
  exit 0
fi

# shellcheck source=scripts/debian-mirror.sh
. "$here/scripts/debian-mirror.sh"
uri=$(debian_mirror)

work="$cache/apt-backports"
mkdir -p "$work/lists/partial" "$work/archives/partial" "$dest"
echo "deb $uri trixie-backports main" >"$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
  -o APT::Get::List-Cleanup=0 -o Acquire::Languages=none)
echo "guest-kernel: reading trixie-backports index from $uri" >&2
if ! apt-get "${apt_opts[@]}" update -qq 2>&1 | tee "$work/update.log" >&2 || grep -q '^[WE]:' "$work/update.log"; then
  echo "guest-kernel: could not read trixie-backports from $uri (see above)" >&2
  exit 1
fi

if ! apt-cache "${apt_opts[@]}" show "$GUEST_KERNEL_PKG" >/dev/null 2>&1; then
  echo "guest-kernel: $GUEST_KERNEL_PKG is no longer in trixie-backports." >&2
  echo "guest-kernel: kernels there now (set GUEST_KERNEL_PKG in scripts/versions.sh):" >&2
  /usr/lib/apt/apt-helper cat-file "$work"/lists/*_Packages* 2>/dev/null | sed -n 's/^Package: \(linux-image-[0-9].*-amd64\)$/  \1/p' | grep -vE 'cloud|-rt-' | sort -uV >&2
  exit 1
fi

# Up to 6.x the image package holds /boot/vmlinuz-REL and config-REL; from
# 7.x it is a metapackage, and linux-binary-REL / linux-base-REL hold
# /usr/lib/modules/REL/{vmlinuz,config}.
rel=${GUEST_KERNEL_PKG#linux-image-}
pkgs=("$GUEST_KERNEL_PKG")
if apt-cache "${apt_opts[@]}" show "linux-binary-$rel" >/dev/null 2>&1; then
  pkgs+=("linux-binary-$rel" "linux-base-$rel")
fi
(cd "$work/archives" && apt-get "${apt_opts[@]}" download "${pkgs[@]}" >&2)
rm -rf "$dest/x" && mkdir -p "$dest/x"
debs=()
for p in "${pkgs[@]}"; do
  deb=$(ls "$work/archives/${p}"_*.deb | head -1)
  dpkg -x "$deb" "$dest/x"
  debs+=("$deb")
done
if ls "$dest"/x/boot/vmlinuz-* >/dev/null 2>&1; then
  cp "$dest"/x/boot/vmlinuz-* "$dest/vmlinuz.tmp"
  cp "$dest"/x/boot/config-* "$dest/config.tmp"
  basename "$dest"/x/boot/vmlinuz-* | sed 's/^vmlinuz-//' >"$dest/release"
elif [ -f "$dest/x/usr/lib/modules/$rel/vmlinuz" ] && [ -f "$dest/x/usr/lib/modules/$rel/config" ]; then
  cp "$dest/x/usr/lib/modules/$rel/vmlinuz" "$dest/vmlinuz.tmp"
  cp "$dest/x/usr/lib/modules/$rel/config" "$dest/config.tmp"
  echo "$rel" >"$dest/release"
else
  echo "guest-kernel: no vmlinuz in ${pkgs[*]}" >&2
  exit 1
fi

missing=""
for opt in CONFIG_SCHED_CLASS_EXT CONFIG_DEBUG_INFO_BTF CONFIG_SCHEDSTATS CONFIG_BPF_SYSCALL CONFIG_CGROUP_CPUACCT; do
  grep -q "^$opt=y" "$dest/config.tmp" || missing="$missing $opt"
done
if [ -n "$missing" ]; then
  echo "guest-kernel: $GUEST_KERNEL_PKG lacks:$missing (need =y). Pick another kernel." >&2
  exit 1
fi
# Only the kernel image and config are used: the guest loads no modules.
rm -rf "$dest/x" "${debs[@]}"
mv "$dest/vmlinuz.tmp" "$dest/vmlinuz"
mv "$dest/config.tmp" "$dest/config"
echo "$dest"
