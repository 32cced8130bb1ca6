#!/usr/bin/env bash
# Helm, for chart lint and template tests: built once per machine from the Go
# module proxy into the cache (no release downloads are reachable here).
source "$(dirname "$0")/lib.sh"
HELM_VERSION=v3.19.2
HELM_DIR="$TESTENV_CACHE/helm-$HELM_VERSION"

up() {
  if [ -x "$HELM_DIR/helm" ]; then
    status_line helm "ready ($("$HELM_DIR/helm" version --short 2>/dev/null))"
    return 0
  fi
  mkdir -p "$HELM_DIR"
  local go=/usr/local/go/bin/go
  command -v go >/dev/null && go="$(command -v go)"
  GOFLAGS=-mod=mod GOBIN="$HELM_DIR" "$go" install -ldflags='-s -w' "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$TESTENV_DATA/helm-build.log" 2>&1 \
    || { tail -20 "$TESTENV_DATA/helm-build.log" >&2; return 1; }
  status_line helm "built ($("$HELM_DIR/helm" version --short 2>/dev/null))"
}

down() { :; }

"${1:?usage: helm.sh up|down}"
