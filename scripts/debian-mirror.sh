# Sourced: debian_mirror prints the Debian mirror the host's apt already
# uses (so no new host is contacted), or deb.debian.org.
debian_mirror() {
  local uri
  uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | sed -nE 's/^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)(https?:[^[:space:]]+).*/\3/p' \
    | grep -E '/debian/?$' | head -1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}
