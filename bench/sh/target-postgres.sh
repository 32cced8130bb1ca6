#!/usr/bin/env bash
# The benchmark's destination PostgreSQL server: a second PostgreSQL 15 cluster,
# set up like the test server (scripts/testenv/postgres-lib.sh) but on a port of
# its own ($TESTENV_BENCH_PG_PORT) with its data under .bench/ of this checkout,
# so PostgreSQL's own logical replication (a subscription) and Tributary write
# into the same kind of server, apart from the source.
#   target-postgres.sh up     starts it (idempotent)
#   target-postgres.sh down   stops it and removes its data
source "$(dirname "$0")/../../scripts/testenv/lib.sh"
source "$TESTENV_ROOT/scripts/testenv/postgres-lib.sh"
PG_BIN=/usr/lib/postgresql/15/bin
BENCH_PG_DIR="$TESTENV_ROOT/.bench/postgres"

up() {
  if ! pg_cluster_ready "$PG_BIN" "$TESTENV_BENCH_PG_PORT"; then
    apt_install postgresql-15 postgresql-client-15
    mkdir -p "$TESTENV_ROOT/.bench"
    pg_cluster_up bench-pg "$PG_BIN" "$PG_BIN" "$BENCH_PG_DIR" "$TESTENV_BENCH_PG_PORT" 256MB
  fi
  # PostgreSQL 15's launcher starts apply workers at most once per this interval
  # (default 5 s): a subscription enabled for each run would otherwise wait for it.
  PGPASSWORD=admin-secret "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$TESTENV_BENCH_PG_PORT" -U tributary_admin \
    -d postgres -c "ALTER SYSTEM SET wal_retrieve_retry_interval = '100ms'" -c 'SELECT pg_reload_conf()' >/dev/null
  status_line bench-pg "ready on 127.0.0.1:$TESTENV_BENCH_PG_PORT"
}

down() {
  pg_cluster_down "$PG_BIN" "$BENCH_PG_DIR"
  status_line bench-pg stopped
}

"${1:?usage: target-postgres.sh up|down}"
