#!/usr/bin/env bash
# A second PostgreSQL for TLS tests, apart from the shared one so that its
# settings stay its own: 127.0.0.1:$TESTENV_PG_TLS_PORT with ssl = on, a
# certificate of a test CA for 127.0.0.1 and localhost, logical decoding on, and
# one role, tributary_tls, that pg_hba.conf admits only over TLS (for normal and
# replication connections). The superuser may connect either way, to set up data.
source "$(dirname "$0")/lib.sh"
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/$PG_MAJOR/bin"
PG_DIR="$TESTENV_DATA/postgres-tls"
PG_DATA="$PG_DIR/data"
PG_SOCK="$PG_DIR/sock"
TLS_DIR="$PG_DIR/tls"
PG_OS_USER=postgres

as_pg() { runuser -u "$PG_OS_USER" -- "$@"; }
psql_admin() {
  PGPASSWORD=admin-secret PGSSLMODE=disable "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 \
    -p "$TESTENV_PG_TLS_PORT" -U tributary_admin -d postgres "$@"
}
ready() { psql_admin -tAc 'select 1' >/dev/null 2>&1; }

# The test CA, the server's certificate, and a CA that signed nothing here (a
# "wrong CA" for tests). Made once; the server gets copies it owns.
write_tls() {
  [ -s "$TLS_DIR/foreign-ca.crt" ] && return 0
  apt_install openssl
  rm -rf "$TLS_DIR"
  mkdir -p "$TLS_DIR"
  tls_ca "$TLS_DIR" ca tributary-testenv-postgres-ca
  tls_issue "$TLS_DIR" server ca "/CN=localhost" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
  tls_ca "$TLS_DIR" foreign-ca tributary-testenv-foreign-ca
  rm -f "$TLS_DIR"/*.srl
  chmod 644 "$TLS_DIR"/*.crt
  chmod 600 "$TLS_DIR"/*.key
}

up() {
  if ready; then
    status_line postgres-tls "ready on 127.0.0.1:$TESTENV_PG_TLS_PORT (already running)"
    return 0
  fi
  apt_install "postgresql-$PG_MAJOR" "postgresql-client-$PG_MAJOR"
  mkdir -p "$PG_DIR"
  chown "$PG_OS_USER" "$PG_DIR"
  write_tls
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    as_pg mkdir -p "$PG_DATA" "$PG_SOCK"
    local pwfile="$PG_DIR/.pw"
    echo admin-secret >"$pwfile"; chown "$PG_OS_USER" "$pwfile"
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U tributary_admin --pwfile="$pwfile" \
      --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$PG_DIR/initdb.log"
    rm -f "$pwfile"
    cat >>"$PG_DATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $TESTENV_PG_TLS_PORT
unix_socket_directories = '$PG_SOCK'
wal_level = logical
max_replication_slots = 16
max_wal_senders = 16
max_connections = 60
shared_buffers = 32MB
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
# Test-only speed settings, as in postgres.sh.
fsync = off
full_page_writes = off
CONF
    # First match wins: the TLS role is refused on any connection without TLS.
    cat >"$PG_DATA/pg_hba.conf" <<HBA
local     all          all                           trust
hostnossl all          tributary_tls  127.0.0.1/32   reject
hostnossl replication  tributary_tls  127.0.0.1/32   reject
hostssl   all          tributary_tls  127.0.0.1/32   scram-sha-256
hostssl   replication  tributary_tls  127.0.0.1/32   scram-sha-256
host      all          all            127.0.0.1/32   scram-sha-256
host      replication  all            127.0.0.1/32   scram-sha-256
HBA
  fi
  # The server reads its key only when it owns it and no one else can.
  install -o "$PG_OS_USER" -m 600 "$TLS_DIR/server.key" "$PG_DATA/server.key"
  install -o "$PG_OS_USER" -m 644 "$TLS_DIR/server.crt" "$PG_DATA/server.crt"
  # The socket directory is given at each start, not only in the config written
  # at initdb: the checkout (and its .testenv) may have moved since.
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/server.log" -o "-k '$PG_SOCK'" -w -t 60 start >/dev/null
  wait_for postgres-tls 30 ready
  psql_admin <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tributary_tls') THEN
    CREATE ROLE tributary_tls LOGIN REPLICATION PASSWORD 'tls-secret';
  END IF;
END $$;
SQL
  if ! psql_admin -tAc "select 1 from pg_database where datname = 'tributary_test'" | grep -q 1; then
    psql_admin -c 'CREATE DATABASE tributary_test'
  fi
  psql_admin -d tributary_test -c 'GRANT CREATE ON DATABASE tributary_test TO tributary_tls'
  status_line postgres-tls "ready on 127.0.0.1:$TESTENV_PG_TLS_PORT (TLS for tributary_tls only)"
}

down() {
  if [ -f "$PG_DATA/postmaster.pid" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PG_DIR"
  status_line postgres-tls stopped
}

"${1:?usage: postgres-tls.sh up|down}"
