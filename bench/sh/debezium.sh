#!/usr/bin/env bash
# Debezium Server for the benchmark, from Maven Central
# (io.debezium:debezium-server-dist, the tar.gz distribution), fetched once into
# the machine-wide testenv cache with Maven, like scripts/testenv/kafka.sh
# fetches the Kafka jars.
#   debezium.sh install   fetches and unpacks it (idempotent); prints its directory
#   debezium.sh java      prints a java of major 21 or newer (Debezium 3 needs it)
# Debezium 3.0.0.Final: the newest release whose parent POM the registry
# mirror of these machines serves (3.6.0.Final's io.debezium:debezium-server
# POM is missing there, so Maven cannot resolve the distribution).
source "$(dirname "$0")/../../scripts/testenv/lib.sh"

DEBEZIUM_VERSION="${BENCH_DEBEZIUM_VERSION:-3.0.0.Final}"
DEBEZIUM_HOME="$TESTENV_CACHE/debezium-server-$DEBEZIUM_VERSION"

install() {
  if [ ! -f "$DEBEZIUM_HOME/.complete" ]; then
    mkdir -p "$DEBEZIUM_HOME"
    exec 8>"$DEBEZIUM_HOME/.lock"
    flock 8
    if [ ! -f "$DEBEZIUM_HOME/.complete" ]; then
      command -v mvn >/dev/null 2>&1 || apt_install maven
      status_line debezium "fetching Debezium Server $DEBEZIUM_VERSION from Maven Central" >&2
      rm -rf "$DEBEZIUM_HOME/dist" "$DEBEZIUM_HOME/debezium-server"
      # A private Maven repository, deleted afterwards (as kafka.sh does).
      if ! mvn -B -q -Dmaven.repo.local="$DEBEZIUM_HOME/m2" \
        org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
        -Dartifact="io.debezium:debezium-server-dist:$DEBEZIUM_VERSION:tar.gz" \
        -DoutputDirectory="$DEBEZIUM_HOME/dist" >"$DEBEZIUM_HOME/mvn.log" 2>&1; then
        tail -n 20 "$DEBEZIUM_HOME/mvn.log" >&2
        echo "bench: fetching Debezium Server $DEBEZIUM_VERSION with Maven failed (log: $DEBEZIUM_HOME/mvn.log)" >&2
        return 1
      fi
      tar xzf "$DEBEZIUM_HOME/dist/debezium-server-dist-$DEBEZIUM_VERSION.tar.gz" -C "$DEBEZIUM_HOME"
      rm -rf "$DEBEZIUM_HOME/m2" "$DEBEZIUM_HOME/dist"
      touch "$DEBEZIUM_HOME/.complete"
    fi
    exec 8>&-
  fi
  echo "$DEBEZIUM_HOME/debezium-server"
}

# The first java of major >= 21: $JAVA_HOME, then the PATH, then /usr/lib/jvm.
java() {
  local candidate major
  for candidate in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(type -P java || true)" /usr/lib/jvm/*/bin/java; do
    [ -x "$candidate" ] || continue
    major="$("$candidate" -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2}')"
    if [ -n "$major" ] && [ "${major%%.*}" -ge 21 ]; then
      echo "$candidate"
      return 0
    fi
  done
  echo "bench: Debezium Server $DEBEZIUM_VERSION needs Java 21 or newer; none found" >&2
  return 1
}

"${1:?usage: debezium.sh install|java}"
