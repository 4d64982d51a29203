# Sourced by the Makefile and by hand (`. scripts/env.sh`): points cargo's
# BPF build (scx_cargo, bindgen) at the project-local clang and libclang.
_sp_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
_sp_cache=${SOFTPART_CACHE:-$_sp_root/.cache}
_sp_site=$(echo "$_sp_cache"/venv/lib/python3*/site-packages)
export PATH="$_sp_cache/bin:$PATH"
export LIBCLANG_PATH="$_sp_site/clang/native"
export BPF_EXTRA_CFLAGS_PRE_INCL="-isystem $_sp_site/ziglang/lib/include"
export BINDGEN_EXTRA_CLANG_ARGS="-isystem $_sp_site/ziglang/lib/include"
unset _sp_root _sp_cache _sp_site
