#!/usr/bin/env bash
# A real Kubernetes control plane for tests: etcd 3.5 and kube-apiserver on
# loopback, with RBAC on and two client identities (an admin in system:masters
# and a user bound to no roles). No controller-manager, scheduler or kubelet:
# objects are stored and watched, RBAC and admission run, nothing reconciles.
#
# Both programs, and the kubectl of the same release, are built from source
# through the Go module proxy by the wrapper modules in kube-build/ (the pinned
# versions live in their go.mod files) into the machine-wide cache, so only the
# first `up` on a machine pays for the build. kubectl is linked at
# .testenv/bin/kubectl.
source "$(dirname "$0")/lib.sh"

BUILD_DIR="$TESTENV_ROOT/scripts/testenv/kube-build"
KUBE_DIR="$TESTENV_DATA/kube"
ETCD_DIR="$TESTENV_DATA/etcd"
PKI="$KUBE_DIR/pki"
KUBE_VERSION="$(mod_version k8s.io/kubernetes "$BUILD_DIR/apiserver/go.mod")"
ETCD_VERSION="$(mod_version go.etcd.io/etcd/server/v3 "$BUILD_DIR/etcd/go.mod")"
: "${KUBE_VERSION:?no k8s.io/kubernetes version in kube-build/apiserver/go.mod}"
: "${ETCD_VERSION:?no go.etcd.io/etcd/server/v3 version in kube-build/etcd/go.mod}"
KUBECTL_VERSION="$(mod_version k8s.io/kubernetes "$BUILD_DIR/kubectl/go.mod")"
[ "$KUBECTL_VERSION" = "$KUBE_VERSION" ] || {
  echo "testenv: kube-build/kubectl pins $KUBECTL_VERSION, kube-build/apiserver $KUBE_VERSION" >&2
  exit 1
}
KUBE_APISERVER="$TESTENV_CACHE/kube-$KUBE_VERSION/kube-apiserver"
KUBECTL="$TESTENV_CACHE/kube-$KUBE_VERSION/kubectl"
ETCD="$TESTENV_CACHE/etcd-$ETCD_VERSION/etcd"
SERVER="https://127.0.0.1:$TESTENV_KUBE_APISERVER_PORT"
ETCD_URL="http://127.0.0.1:$TESTENV_ETCD_CLIENT_PORT"

# --- programs ---------------------------------------------------------------

build_programs() {
  build_tool "$BUILD_DIR/etcd" go.etcd.io/etcd/server/v3 "$ETCD"
  local flags
  mapfile -t flags < <(kube_version_ldflags "$KUBE_VERSION")
  build_tool "$BUILD_DIR/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$KUBE_APISERVER" "${flags[@]}"
  build_tool "$BUILD_DIR/kubectl" k8s.io/kubernetes/cmd/kubectl "$KUBECTL" "${flags[@]}"
  mkdir -p "$TESTENV_DATA/bin"
  ln -sfn "$KUBECTL" "$TESTENV_DATA/bin/kubectl"
}

# --- credentials ------------------------------------------------------------

b64() { base64 -w0 <"$1"; }

# write_kubeconfig FILE USER CERT_NAME: a self-contained kubeconfig (CA and
# client credentials embedded) for one identity.
write_kubeconfig() {
  local file="$1" user="$2" name="$3"
  cat >"$file.tmp" <<YAML
apiVersion: v1
kind: Config
clusters:
  - name: testenv
    cluster:
      server: $SERVER
      certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
  - name: $user
    user:
      client-certificate-data: $(b64 "$PKI/$name.crt")
      client-key-data: $(b64 "$PKI/$name.key")
contexts:
  - name: $user@testenv
    context:
      cluster: testenv
      user: $user
      namespace: default
current-context: $user@testenv
YAML
  chmod 600 "$file.tmp"
  mv "$file.tmp" "$file"
}

credentials_complete() {
  local f
  for f in ca.crt ca.key apiserver.crt apiserver.key sa.key sa.pub admin.crt admin.key \
    restricted.crt restricted.key; do
    [ -s "$PKI/$f" ] || return 1
  done
  [ -s "$KUBE_DIR/admin.kubeconfig" ] && [ -s "$KUBE_DIR/restricted.kubeconfig" ]
}

# Creates the CA, serving, service-account and client credentials once per
# checkout; sets CREDENTIALS_NEW=1 when it (re)created them.
CREDENTIALS_NEW=0
ensure_credentials() {
  if credentials_complete; then return 0; fi
  CREDENTIALS_NEW=1
  apt_install openssl
  rm -rf "$PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  tls_ca "$PKI" ca tributary-testenv-ca
  tls_issue "$PKI" apiserver ca "/CN=kube-apiserver" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  local client="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  tls_issue "$PKI" admin ca "/O=system:masters/CN=tributary-admin" "$client"
  tls_issue "$PKI" restricted ca "/CN=tributary-restricted" "$client"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  write_kubeconfig "$KUBE_DIR/admin.kubeconfig" tributary-admin admin
  write_kubeconfig "$KUBE_DIR/restricted.kubeconfig" tributary-restricted restricted
}

# --- processes --------------------------------------------------------------

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

etcd_ready() { curl -fs --max-time 2 "$ETCD_URL/health" | grep -q '"health":"true"'; }

apiserver_ready() {
  [ -s "$PKI/ca.crt" ] || return 1
  curl -fs --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$SERVER/readyz" | grep -qx ok
}

# spawn NAME COMMAND...: runs COMMAND in its own session, detached from this
# script and its terminal, logging to $KUBE_DIR/NAME.log.
spawn() {
  local name="$1"; shift
  setsid "$@" </dev/null >>"$KUBE_DIR/$name.log" 2>&1 &
  echo $! >"$KUBE_DIR/$name.pid"
}

refuse_foreign_port() {
  if port_open "$2"; then
    echo "testenv: 127.0.0.1:$2 is taken by a process this checkout did not start ($1)" >&2
    exit 1
  fi
}

start_etcd() {
  refuse_foreign_port etcd "$TESTENV_ETCD_CLIENT_PORT"
  refuse_foreign_port etcd "$TESTENV_ETCD_PEER_PORT"
  mkdir -p "$ETCD_DIR"
  chmod 700 "$ETCD_DIR"
  # --unsafe-no-fsync: test data only; crash tests never kill etcd.
  spawn etcd "$ETCD" --name testenv --data-dir "$ETCD_DIR" \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "http://127.0.0.1:$TESTENV_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$TESTENV_ETCD_PEER_PORT" \
    --initial-cluster "testenv=http://127.0.0.1:$TESTENV_ETCD_PEER_PORT" \
    --unsafe-no-fsync --quota-backend-bytes 2147483648 --log-level warn
  wait_for etcd 60 etcd_ready || { tail -n 20 "$KUBE_DIR/etcd.log" >&2; exit 1; }
}

start_apiserver() {
  refuse_foreign_port kube-apiserver "$TESTENV_KUBE_APISERVER_PORT"
  mkdir -p "$KUBE_DIR/cert-dir"
  # As controller-runtime's envtest: the ServiceAccount admission plugin is off
  # because no controller-manager creates the `default` service accounts that
  # it would demand of every pod. The endpoint reconciler is off because
  # Endpoints may not point at a loopback address.
  spawn kube-apiserver "$KUBE_APISERVER" \
    --etcd-servers "$ETCD_URL" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --secure-port "$TESTENV_KUBE_APISERVER_PORT" --cert-dir "$KUBE_DIR/cert-dir" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --authorization-mode RBAC \
    --service-account-issuer "$SERVER" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --disable-admission-plugins ServiceAccount \
    --endpoint-reconciler-type none \
    --allow-privileged=true --profiling=false
  if ! wait_for kube-apiserver 180 apiserver_ready; then
    tail -n 30 "$KUBE_DIR/kube-apiserver.log" >&2
    exit 1
  fi
}

up() {
  if alive "$KUBE_DIR/etcd.pid" && alive "$KUBE_DIR/kube-apiserver.pid" && credentials_complete \
    && apiserver_ready && [ -x "$TESTENV_DATA/bin/kubectl" ]; then
    status_line kube "ready on $SERVER (already running)"
    return 0
  fi
  apt_install curl ca-certificates openssl
  build_programs
  mkdir -p "$KUBE_DIR"
  ensure_credentials
  # An apiserver started before the credentials were (re)made would still use the old ones.
  [ "$CREDENTIALS_NEW" = 0 ] || stop_pidfile "$KUBE_DIR/kube-apiserver.pid"
  if ! { alive "$KUBE_DIR/etcd.pid" && etcd_ready; }; then
    stop_pidfile "$KUBE_DIR/etcd.pid"
    start_etcd
  fi
  if ! { alive "$KUBE_DIR/kube-apiserver.pid" && apiserver_ready; }; then
    stop_pidfile "$KUBE_DIR/kube-apiserver.pid"
    start_apiserver
  fi
  status_line kube "ready on $SERVER (kube-apiserver $KUBE_VERSION, etcd $ETCD_VERSION)"
}

down() {
  stop_pidfile "$KUBE_DIR/kube-apiserver.pid"
  stop_pidfile "$KUBE_DIR/etcd.pid"
  rm -rf "$KUBE_DIR" "$ETCD_DIR"
  status_line kube stopped
}

"${1:?usage: kube.sh up|down}"
