#!/usr/bin/env bash
# `make kind-e2e`, after the image is built and loaded: installs the chart into
# the current kubectl context, runs scripts/kind/mirror.yaml end to end and
# fails at the first step that does not hold: rows arrive, a pause holds
# changes back, a resume delivers them, an added table is loaded, deleting the
# Mirror drops its replication slot. Needs a cluster that can pull postgres:16.
set -euo pipefail
cd "$(dirname "$0")/../.."

NAMESPACE="${NAMESPACE:-tributary}"
IMAGE="${IMAGE:?IMAGE=repository:tag of the loaded image}"
k() { kubectl -n "$NAMESPACE" "$@"; }
psql_in() { k exec statefulset/postgres -- psql -U postgres -d "$1" -tAc "$2"; }
fail() { echo "kind-e2e: $*" >&2; exit 1; }

# wait_until DESCRIPTION SECONDS COMMAND...: polls COMMAND once a second.
wait_until() {
  local what="$1" seconds="$2"; shift 2
  for _ in $(seq "$seconds"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  fail "timed out after ${seconds}s waiting for $what"
}
same_rows() {
  [ "$(psql_in source "SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM $1 t")" = \
    "$(psql_in destination "SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM $1 t")" ]
}
phase_is() { [ "$(k get mirror e2e -o 'jsonpath={.status.phase}')" = "$1" ]; }
slot_count() { psql_in source "SELECT count(*) FROM pg_replication_slots WHERE database = 'source'"; }

k get namespace "$NAMESPACE" >/dev/null 2>&1 || kubectl create namespace "$NAMESPACE"
k apply -f scripts/kind/postgres.yaml
k rollout status statefulset/postgres --timeout=180s
wait_until "postgres to accept connections" 120 psql_in source "SELECT 1"

helm upgrade --install tributary charts/tributary --namespace "$NAMESPACE" \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" --set image.pullPolicy=Never \
  --set catalog.url=postgres://postgres:postgres@postgres:5432/catalog --set api.password=kind-e2e-api-password
k rollout status deployment/tributary-operator --timeout=180s
k rollout status deployment/tributary-api-server --timeout=180s

k apply -f scripts/kind/mirror.yaml
k wait peer/source peer/destination --for=condition=Ready --timeout=120s
wait_until "the initial load" 300 same_rows items
wait_until "STATUS_RUNNING" 120 phase_is STATUS_RUNNING
k rollout status statefulset/tributary-engine-e2e --timeout=120s
echo "kind-e2e: initial load and CDC running"

k patch mirror e2e --type merge -p '{"spec":{"state":"Paused"}}'
wait_until "STATUS_PAUSED" 120 phase_is STATUS_PAUSED
psql_in source "INSERT INTO items VALUES (100001, 'while paused')"
sleep 10
[ "$(psql_in destination "SELECT count(*) FROM items WHERE id = 100001")" = 0 ] \
  || fail "a change arrived while the mirror was paused"

k patch mirror e2e --type json -p '[
  {"op": "replace", "path": "/spec/state", "value": "Running"},
  {"op": "add", "path": "/spec/tableMappings/-",
   "value": {"source": {"schema": "public", "table": "extra"}, "destination": {"schema": "public", "table": "extra"}}}]'
wait_until "the change made while paused" 180 same_rows items
wait_until "the added table" 180 same_rows extra
echo "kind-e2e: pause, resume and an added table work"

[ "$(slot_count)" = 1 ] || fail "expected one replication slot for the mirror"
k delete mirror e2e --timeout=180s
[ "$(slot_count)" = 0 ] || fail "the replication slot outlived the Mirror"
engine_gone() { ! k get statefulset tributary-engine-e2e; }
# The StatefulSet is owned by the Mirror: the garbage collector removes it.
wait_until "the engine StatefulSet to be collected" 120 engine_gone
echo "kind-e2e: passed"
