#!/usr/bin/env bash
# PostgreSQL for tests: a private cluster on 127.0.0.1:$TESTENV_PG_PORT with
# logical decoding on, a superuser, and a non-superuser REPLICATION role
# (postgres-lib.sh). Other majors: postgres-versions.sh.
source "$(dirname "$0")/lib.sh"
source "$TESTENV_ROOT/scripts/testenv/postgres-lib.sh"
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/$PG_MAJOR/bin"
PG_DIR="$TESTENV_DATA/postgres"

up() {
  if pg_cluster_ready "$PG_BIN" "$TESTENV_PG_PORT"; then
    status_line postgres "ready on 127.0.0.1:$TESTENV_PG_PORT (already running)"
    return 0
  fi
  apt_install "postgresql-$PG_MAJOR" "postgresql-client-$PG_MAJOR"
  pg_cluster_up postgres "$PG_BIN" "$PG_BIN" "$PG_DIR" "$TESTENV_PG_PORT" 256MB
  status_line postgres "ready on 127.0.0.1:$TESTENV_PG_PORT ($("$PG_BIN/postgres" --version | awk '{print $3}'))"
}

down() {
  pg_cluster_down "$PG_BIN" "$PG_DIR"
  status_line postgres stopped
}

"${1:?usage: postgres.sh up|down}"
