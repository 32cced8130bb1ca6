#!/usr/bin/env bash
# Apache Kafka for the loopback tests: one KRaft node (broker + controller) run
# from the Maven Central jars with the machine's java.
#   kafka.sh up     starts it (idempotent; a no-op when it is already healthy)
#   kafka.sh down   stops it and removes .testenv/kafka
# Listeners on 127.0.0.1 (scripts/testenv/ports.env):
#   PLAINTEXT       $TESTENV_KAFKA_PLAINTEXT_PORT
#   SASL_PLAINTEXT  $TESTENV_KAFKA_SASL_PORT  (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
#   POD             $TESTENV_KAFKA_POD_PORT  (SASL as above), advertised as
#                   $TESTENV_NODE_GATEWAY:$TESTENV_KAFKA_POD_PORT: the real node's pods
#                   reach it there through node.sh's DNAT to 127.0.0.1; the
#                   other listeners advertise 127.0.0.1, which a pod cannot dial.
#   CONTROLLER      $TESTENV_KAFKA_CONTROLLER_PORT
# Users (test/support/testenv.ts): PLAIN tributary, SCRAM tributary-scram.
source "$(dirname "$0")/lib.sh"

KAFKA_VERSION=3.9.2
KAFKA_HOME="$TESTENV_CACHE/kafka-$KAFKA_VERSION"
KAFKA_LIBS="$KAFKA_HOME/libs"
KAFKA_SRC="$TESTENV_ROOT/scripts/testenv/kafka"
# Resolved: the running check compares it with the broker's command line, and
# .testenv may be a link to another checkout's.
KAFKA_DIR="$(realpath -m "$TESTENV_DATA/kafka")"
KAFKA_CONF="$KAFKA_DIR/server.properties"
KAFKA_DATA="$KAFKA_DIR/data"
KAFKA_LOGS="$KAFKA_DIR/logs"
KAFKA_PID="$KAFKA_DIR/kafka.pid"
KAFKA_HEAP_OPTS=(-Xms256m -Xmx512m)
START_TIMEOUT=120

# Test-only credentials; test/support/testenv.ts holds the same values.
PLAIN_USER=tributary
PLAIN_PASSWORD=kafka-plain-secret
SCRAM_USER=tributary-scram
SCRAM_PASSWORD=kafka-scram-secret

ensure_tools() {
  command -v java >/dev/null 2>&1 || apt_install default-jre-headless # Kafka 3.9 runs on Java 11-23
  if [ ! -f "$KAFKA_HOME/.complete" ]; then
    command -v mvn >/dev/null 2>&1 || apt_install maven
  fi
}

# Fetches kafka_2.13 and its runtime dependencies into the machine-wide cache once.
install_kafka() {
  [ -f "$KAFKA_HOME/.complete" ] && return 0
  mkdir -p "$KAFKA_HOME"
  exec 8>"$KAFKA_HOME/.lock"
  flock 8 # another checkout may be downloading the same version
  if [ ! -f "$KAFKA_HOME/.complete" ]; then
    status_line kafka "fetching Apache Kafka $KAFKA_VERSION jars from Maven Central"
    rm -rf "$KAFKA_HOME/libs.tmp" "$KAFKA_LIBS"
    # A private Maven repository: never races another project's ~/.m2; deleted afterwards.
    if ! mvn -B -q -f "$KAFKA_SRC/pom.xml" \
      -Dmaven.repo.local="$KAFKA_HOME/m2" \
      -Dkafka.version="$KAFKA_VERSION" \
      -Dkafka.libs="$KAFKA_HOME/libs.tmp" \
      dependency:copy-dependencies >"$KAFKA_HOME/mvn.log" 2>&1; then
      tail -n 30 "$KAFKA_HOME/mvn.log" >&2
      echo "testenv: fetching Kafka $KAFKA_VERSION with Maven failed (log: $KAFKA_HOME/mvn.log)" >&2
      return 1
    fi
    [ -f "$KAFKA_HOME/libs.tmp/kafka_2.13-$KAFKA_VERSION.jar" ] || {
      echo "testenv: kafka_2.13-$KAFKA_VERSION.jar missing after the Maven download" >&2
      return 1
    }
    mv "$KAFKA_HOME/libs.tmp" "$KAFKA_LIBS"
    rm -rf "$KAFKA_HOME/m2"
    touch "$KAFKA_HOME/.complete"
  fi
  exec 8>&-
}

render_config() {
  sed -e "s|@PLAINTEXT_PORT@|$TESTENV_KAFKA_PLAINTEXT_PORT|g" \
    -e "s|@SASL_PORT@|$TESTENV_KAFKA_SASL_PORT|g" \
    -e "s|@CONTROLLER_PORT@|$TESTENV_KAFKA_CONTROLLER_PORT|g" \
    -e "s|@POD_PORT@|$TESTENV_KAFKA_POD_PORT|g" \
    -e "s|@POD_GATEWAY@|$TESTENV_NODE_GATEWAY|g" \
    -e "s|@PLAIN_USER@|$PLAIN_USER|g" \
    -e "s|@PLAIN_PASSWORD@|$PLAIN_PASSWORD|g" \
    -e "s|@DATA_DIR@|$KAFKA_DATA|g" \
    "$KAFKA_SRC/server.properties.template"
}

java_opts() {
  printf '%s\n' "${KAFKA_HEAP_OPTS[@]}" \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData \
    -Djava.awt.headless=true \
    "-Dkafka.logs.dir=$KAFKA_LOGS" \
    "-Dlog4j.configuration=file:$KAFKA_SRC/log4j.properties" \
    -cp "$KAFKA_LIBS/*"
}

# The pid file names a live Kafka JVM of this checkout.
running() {
  local pid
  [ -f "$KAFKA_PID" ] || return 1
  pid="$(cat "$KAFKA_PID")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "kafka.Kafka $KAFKA_CONF"
}

# A real Kafka protocol round trip: ApiVersions v0 (allowed before SASL
# authentication too) must come back with our correlation id and error code 0.
api_versions_ok() {
  local hex
  # shellcheck disable=SC2016 # the inner script expands $1 itself
  hex="$(timeout 3 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x07\x00\x04tbhc" >&3
    head -c 10 <&3 | od -An -tx1' _ "$1" 2>/dev/null)" || return 1
  hex="${hex//[[:space:]]/}"
  [[ "$hex" == ????????000000070000 ]]
}

healthy() {
  running &&
    api_versions_ok "$TESTENV_KAFKA_PLAINTEXT_PORT" &&
    api_versions_ok "$TESTENV_KAFKA_SASL_PORT" &&
    api_versions_ok "$TESTENV_KAFKA_POD_PORT" &&
    port_open "$TESTENV_KAFKA_CONTROLLER_PORT"
}

started() {
  running || return 1
  grep -q 'Kafka Server started' "$KAFKA_LOGS/server.log" 2>/dev/null || return 1
  healthy
}

# Kafka cluster ids are 16 random bytes in URL-safe base64 without padding;
# like Kafka's own Uuid.randomUuid, avoid a leading '-' (it reads as an option).
new_cluster_id() {
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [ "${id:0:1}" != "-" ] && { echo "$id"; return; }
  done
}

format_storage() {
  local opts
  mapfile -t opts < <(java_opts)
  rm -rf "$KAFKA_DATA"
  mkdir -p "$KAFKA_DATA"
  if ! java "${opts[@]}" kafka.tools.StorageTool format \
    --cluster-id "$(new_cluster_id)" --config "$KAFKA_CONF" \
    --add-scram "SCRAM-SHA-256=[name=$SCRAM_USER,password=$SCRAM_PASSWORD]" \
    --add-scram "SCRAM-SHA-512=[name=$SCRAM_USER,password=$SCRAM_PASSWORD]" \
    >"$KAFKA_LOGS/format.log" 2>&1 </dev/null 8>&- 9>&-; then
    cat "$KAFKA_LOGS/format.log" >&2
    rm -rf "$KAFKA_DATA"
    echo "testenv: formatting the Kafka storage failed" >&2
    return 1
  fi
}

start_broker() {
  local opts
  mapfile -t opts < <(java_opts)
  [ -f "$KAFKA_LOGS/server.log" ] && mv -f "$KAFKA_LOGS/server.log" "$KAFKA_LOGS/server.log.previous"
  # setsid: its own session, so a Ctrl-C in the shell that ran `up` leaves it alone.
  # The lock descriptors are closed so the broker never holds them.
  setsid java "${opts[@]}" kafka.Kafka "$KAFKA_CONF" \
    >"$KAFKA_LOGS/kafka.out" 2>&1 </dev/null 8>&- 9>&- &
  echo $! >"$KAFKA_PID"
  local deadline=$((SECONDS + START_TIMEOUT)) failure=""
  until started; do
    running || { failure="exited during startup"; break; }
    [ "$SECONDS" -lt "$deadline" ] || { failure="did not become ready within ${START_TIMEOUT}s"; break; }
    sleep 0.2
  done
  if [ -n "$failure" ]; then
    echo "testenv: kafka $failure (logs: $KAFKA_LOGS)" >&2
    echo "--- $KAFKA_LOGS/kafka.out" >&2
    tail -n 20 "$KAFKA_LOGS/kafka.out" >&2 || true
    echo "--- $KAFKA_LOGS/server.log" >&2
    grep -E 'ERROR|FATAL|Exception' "$KAFKA_LOGS/server.log" 2>/dev/null | tail -n 20 >&2 || true
    stop_pidfile "$KAFKA_PID"
    return 1
  fi
}

summary() {
  echo "Kafka $KAFKA_VERSION on 127.0.0.1:$TESTENV_KAFKA_PLAINTEXT_PORT (plaintext), :$TESTENV_KAFKA_SASL_PORT (SASL PLAIN/SCRAM), pods $TESTENV_NODE_GATEWAY:$TESTENV_KAFKA_POD_PORT pid $(cat "$KAFKA_PID")"
}

up() {
  mkdir -p "$KAFKA_DIR"
  exec 9>"$KAFKA_DIR/.lock"
  flock 9 # two `up`s of this checkout at once: the second waits, then finds it running

  local rendered
  rendered="$(render_config)"
  if healthy && [ "$rendered" = "$(cat "$KAFKA_CONF" 2>/dev/null)" ]; then
    status_line kafka "already running: $(summary)"
    return 0
  fi
  if running; then
    # Running but unhealthy, or its configuration changed: restart it (data stays).
    stop_pidfile "$KAFKA_PID"
  fi
  local port
  for port in "$TESTENV_KAFKA_PLAINTEXT_PORT" "$TESTENV_KAFKA_SASL_PORT" "$TESTENV_KAFKA_POD_PORT" \
    "$TESTENV_KAFKA_CONTROLLER_PORT"; do
    if port_open "$port"; then
      echo "testenv: port $port is taken by a process this checkout did not start; stop it first" >&2
      return 1
    fi
  done
  # Only now: a pid file naming a broker this check refused must stay.
  rm -f "$KAFKA_PID"

  ensure_tools
  install_kafka
  mkdir -p "$KAFKA_LOGS"
  printf '%s\n' "$rendered" >"$KAFKA_CONF"
  # SCRAM credentials are written into the metadata log at format time, so an
  # existing, formatted data directory already holds them.
  [ -f "$KAFKA_DATA/meta.properties" ] || format_storage
  start_broker
  status_line kafka "started: $(summary)"
}

down() {
  if [ -d "$KAFKA_DIR" ]; then
    exec 9>"$KAFKA_DIR/.lock"
    flock 9
    stop_pidfile "$KAFKA_PID"
    rm -rf "$KAFKA_DIR"
  fi
  status_line kafka "stopped"
}

# Sourced by kafka-tls.sh for its functions; run, it manages the shared broker.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    up) up ;;
    down) down ;;
    *)
      echo "usage: $0 up|down" >&2
      exit 2
      ;;
  esac
fi
