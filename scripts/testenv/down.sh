#!/usr/bin/env bash
# Stops every test service and removes its per-checkout data. The machine-wide
# cache of programs stays, so the next `up` is quick.
source "$(dirname "$0")/lib.sh"
for svc in node snowflake kube kafka-tls kafka clickhouse ssh postgres-versions postgres-tls postgres; do
  "$TESTENV_ROOT/scripts/testenv/$svc.sh" down || true
done
rm -rf "$TESTENV_DATA"
