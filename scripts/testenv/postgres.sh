#!/usr/bin/env bash
# PostgreSQL for tests: a private cluster on 127.0.0.1:$TESTENV_PG_PORT with
# logical decoding on, a superuser, and a non-superuser REPLICATION role.
source "$(dirname "$0")/lib.sh"
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/$PG_MAJOR/bin"
PG_DIR="$TESTENV_DATA/postgres"
PG_DATA="$PG_DIR/data"
PG_SOCK="$PG_DIR/sock"
PG_OS_USER=postgres

as_pg() { runuser -u "$PG_OS_USER" -- "$@"; }
psql_admin() {
  PGPASSWORD=admin-secret "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$TESTENV_PG_PORT" \
    -U tributary_admin -d postgres "$@"
}
ready() { PGPASSWORD=admin-secret "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$TESTENV_PG_PORT" -U tributary_admin; }

up() {
  if ready && psql_admin -tAc 'select 1' >/dev/null 2>&1; then
    status_line postgres "ready on 127.0.0.1:$TESTENV_PG_PORT (already running)"
    return 0
  fi
  apt_install "postgresql-$PG_MAJOR" "postgresql-client-$PG_MAJOR"
  mkdir -p "$PG_DIR"
  chown "$PG_OS_USER" "$PG_DIR"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    as_pg mkdir -p "$PG_DATA" "$PG_SOCK"
    local pwfile="$PG_DIR/.pw"
    echo admin-secret >"$pwfile"; chown "$PG_OS_USER" "$pwfile"
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U tributary_admin --pwfile="$pwfile" \
      --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$PG_DIR/initdb.log"
    rm -f "$pwfile"
    cat >>"$PG_DATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $TESTENV_PG_PORT
unix_socket_directories = '$PG_SOCK'
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
max_connections = 200
shared_buffers = 256MB
# Test-only speed settings: the machine does not lose power under a test, and
# crash tests kill the engine or stop the server, both of which these survive.
# synchronous_commit stays on: walsenders only stream flushed WAL.
fsync = off
full_page_writes = off
CONF
    cat >"$PG_DATA/pg_hba.conf" <<HBA
local   all          all                      trust
host    all          all          127.0.0.1/32 scram-sha-256
host    replication  all          127.0.0.1/32 scram-sha-256
HBA
  fi
  # The socket directory is given at each start, not only in the config written
  # at initdb: the checkout (and its .testenv) may have moved since.
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/server.log" -o "-k '$PG_SOCK'" -w -t 60 start >/dev/null
  wait_for postgres 30 ready
  psql_admin <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tributary_repl') THEN
    CREATE ROLE tributary_repl LOGIN REPLICATION PASSWORD 'repl-secret';
  END IF;
END $$;
SQL
  if ! psql_admin -tAc "select 1 from pg_database where datname = 'tributary_test'" | grep -q 1; then
    psql_admin -c 'CREATE DATABASE tributary_test'
  fi
  psql_admin -d tributary_test -c 'CREATE EXTENSION IF NOT EXISTS hstore' \
    -c 'GRANT CREATE ON DATABASE tributary_test TO tributary_repl'
  status_line postgres "ready on 127.0.0.1:$TESTENV_PG_PORT ($("$PG_BIN/postgres" --version | awk '{print $3}'))"
}

down() {
  if [ -f "$PG_DATA/postmaster.pid" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PG_DIR"
  status_line postgres stopped
}

"${1:?usage: postgres.sh up|down}"
