# One PostgreSQL test cluster, set up the same way whatever its version:
# postgres.sh (the shared server) and postgres-versions.sh (other majors) source
# this. Sourced after lib.sh, never run.

# The server refuses to run as root: its programs run as this OS user.
PG_OS_USER=postgres

as_pg() { runuser -u "$PG_OS_USER" -- "$@"; }

# pg_cluster_ready CLIENT_BIN PORT: the server answers and accepts the test superuser.
pg_cluster_ready() {
  PGPASSWORD=admin-secret "$1/pg_isready" -q -h 127.0.0.1 -p "$2" -U tributary_admin &&
    PGPASSWORD=admin-secret "$1/psql" -X -q -h 127.0.0.1 -p "$2" -U tributary_admin -d postgres \
      -tAc 'select 1' >/dev/null 2>&1
}

# pg_cluster_up NAME SERVER_BIN CLIENT_BIN DIR PORT SHARED_BUFFERS: initialises (once)
# and starts a cluster in DIR/data listening on 127.0.0.1:PORT, with logical
# decoding on, the superuser tributary_admin/admin-secret, the non-superuser
# REPLICATION role tributary_repl/repl-secret, and database tributary_test with
# hstore. SERVER_BIN holds initdb, pg_ctl and postgres; CLIENT_BIN psql and
# pg_isready (any version reaches any server).
pg_cluster_up() {
  local name="$1" server_bin="$2" client_bin="$3" dir="$4" port="$5" shared_buffers="$6"
  local data="$dir/data" sock="$dir/sock"
  psql_admin() {
    PGPASSWORD=admin-secret "$client_bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" \
      -U tributary_admin -d postgres "$@"
  }
  mkdir -p "$dir"
  chown "$PG_OS_USER" "$dir"
  if [ ! -f "$data/PG_VERSION" ]; then
    as_pg mkdir -p "$data" "$sock"
    local pwfile="$dir/.pw"
    echo admin-secret >"$pwfile"; chown "$PG_OS_USER" "$pwfile"
    as_pg "$server_bin/initdb" -D "$data" -U tributary_admin --pwfile="$pwfile" \
      --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
    rm -f "$pwfile"
    cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
max_connections = 200
shared_buffers = $shared_buffers
# Test-only speed settings: the machine does not lose power under a test, and
# crash tests kill the engine or stop the server, both of which these survive.
# synchronous_commit stays on: walsenders only stream flushed WAL.
fsync = off
full_page_writes = off
CONF
    cat >"$data/pg_hba.conf" <<HBA
local   all          all                      trust
host    all          all          127.0.0.1/32 scram-sha-256
host    replication  all          127.0.0.1/32 scram-sha-256
HBA
  fi
  # The socket directory is given at each start, not only in the config written
  # at initdb: the checkout (and its .testenv) may have moved since.
  as_pg "$server_bin/pg_ctl" -D "$data" -l "$dir/server.log" -o "-k '$sock'" -w -t 60 start >/dev/null
  wait_for "$name" 30 pg_cluster_ready "$client_bin" "$port"
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
}

# pg_cluster_down SERVER_BIN DIR: stops the cluster in DIR (if it runs) and removes DIR.
pg_cluster_down() {
  if [ -f "$2/data/postmaster.pid" ]; then
    as_pg "$1/pg_ctl" -D "$2/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$2"
}
