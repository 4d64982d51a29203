#!/usr/bin/env bash
# Builds upstream scx_bpfland (crates.io, version pinned in versions.sh) into
# .cache/scx/bin with the project's clang, for the bench's
# `external:scx_bpfland` policy; does nothing when that version is there.
# Prints the binary's directory, for PATH.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/versions.sh
. "$here/scripts/versions.sh"
# shellcheck source=scripts/env.sh
. "$here/scripts/env.sh"
root=${SOFTPART_CACHE:-$here/.cache}/scx
stamp="$root/.scx_bpfland-$SCX_BPFLAND_VERSION"
if [ ! -x "$root/bin/scx_bpfland" ] || [ ! -f "$stamp" ]; then
  echo "scx-bpfland: building scx_bpfland $SCX_BPFLAND_VERSION from crates.io into $root" >&2
  cargo install --quiet --locked --force --version "=$SCX_BPFLAND_VERSION" --root "$root" scx_bpfland >&2
  touch "$stamp"
fi
echo "$root/bin"
