#!/usr/bin/env bash
# Builds scx_softpart as it was at an earlier revision, for running it
# beside the current one in one bench boot:
#
#   bin=$(bash scripts/build-rev.sh REV)
#   PATH="$bin:$PATH" target/release/softpart-bench run SCENARIO.toml \
#     --policies "softpart,external-homes:scx_softpart-REV [ARGS]"
#
# (external-homes: the groups get their homes through the softpart CLI, as
# under the softpart policy.) The revision is checked out in a git
# worktree under .cache/rev/ and built there with the project's toolchain;
# the binary goes to .cache/rev/bin/scx_softpart-REV (REV as given, e.g. a
# short commit id). Nothing is built again when it is there. Prints the
# binary's directory, for PATH.
set -euo pipefail

rev=${1:?usage: build-rev.sh REV}
here=$(cd "$(dirname "$0")/.." && pwd)
root=${SOFTPART_CACHE:-$here/.cache}/rev
bin="$root/bin/scx_softpart-$rev"
if [ ! -x "$bin" ]; then
  commit=$(git -C "$here" rev-parse --verify "$rev^{commit}")
  tree="$root/src-$rev"
  [ -d "$tree" ] || git -C "$here" worktree add --detach "$tree" "$commit" >&2
  mkdir -p "$root/bin"
  # The worktree shares this checkout's toolchain (.cache) and its cargo
  # target directory stays its own, so the current build is not touched.
  (
    export SOFTPART_CACHE=${SOFTPART_CACHE:-$here/.cache}
    # shellcheck source=scripts/env.sh
    . "$here/scripts/env.sh"
    cd "$tree"
    cargo build --release --locked -p scx_softpart >&2
  )
  cp "$tree/target/release/scx_softpart" "$bin"
fi
echo "$root/bin"
