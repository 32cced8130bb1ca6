#!/usr/bin/env bash
# Prometheus and promtool, for the test that evaluates the chart's alert rules
# with Prometheus's own rule engine against a real service's /metrics. Debian's
# package, downloaded once per machine into the cache and unpacked there (its
# maintainer scripts would start a system service): only the two static
# binaries are used. Each test run starts its own server on a free loopback
# port with its own data directory, so there is nothing to start here.
source "$(dirname "$0")/lib.sh"
PROMETHEUS_VERSION=2.42.0+ds-5+deb12u1
PROMETHEUS_DIR="$TESTENV_CACHE/prometheus-${PROMETHEUS_VERSION//+/_}"

up() {
  if [ -x "$PROMETHEUS_DIR/usr/bin/prometheus" ] && [ -x "$PROMETHEUS_DIR/usr/bin/promtool" ]; then
    status_line prometheus "ready ($("$PROMETHEUS_DIR/usr/bin/prometheus" --version 2>&1 | head -1))"
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  local tmp
  tmp="$(mktemp -d)"
  # apt-get download writes into the working directory, as the _apt user when it can.
  chmod 777 "$tmp"
  if ! (cd "$tmp" && apt-get download -qq "prometheus=$PROMETHEUS_VERSION" >/dev/null 2>&1); then
    apt-get -o DPkg::Lock::Timeout=120 update -qq >/dev/null
    (cd "$tmp" && apt-get download -qq "prometheus=$PROMETHEUS_VERSION" >/dev/null)
  fi
  rm -rf "$PROMETHEUS_DIR.partial"
  dpkg-deb -x "$tmp"/prometheus_*.deb "$PROMETHEUS_DIR.partial"
  rm -rf "$tmp" "$PROMETHEUS_DIR"
  mv "$PROMETHEUS_DIR.partial" "$PROMETHEUS_DIR"
  status_line prometheus "installed ($("$PROMETHEUS_DIR/usr/bin/prometheus" --version 2>&1 | head -1))"
}

down() { :; }

"${1:?usage: prometheus.sh up|down}"
