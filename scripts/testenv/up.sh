#!/usr/bin/env bash
# Starts every test service (or the ones named) on loopback. Idempotent.
source "$(dirname "$0")/lib.sh"
services=("$@")
[ "${#services[@]}" -gt 0 ] || services=(postgres postgres-tls postgres-versions ssh clickhouse kafka kafka-tls kube snowflake helm prometheus browser node)
for svc in "${services[@]}"; do
  "$TESTENV_ROOT/scripts/testenv/$svc.sh" up
done
