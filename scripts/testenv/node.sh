#!/usr/bin/env bash
# A real single-node Kubernetes cluster for the chart's end-to-end suite
# (test/cluster/): etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and a kubelet running pods through containerd and runc on a
# bridge network, with the project's image imported (scripts/testenv/image.sh).
#
# It is a second control plane, separate from kube.sh's: the suites on that one
# rely on it running without ServiceAccount admission and without controllers
# (objects are stored, nothing reconciles), which a node cannot do without.
#
# The Kubernetes programs are the release pinned by kube-build/apiserver, built
# by kube-build/node into the machine-wide cache (etcd and kube-apiserver are
# kube.sh's builds). containerd, runc and the CNI plugins are Debian packages.
#
# Side effects on the machine, all undone by `down` (see docs/testing.md):
# - the bridge $BRIDGE with $GATEWAY/24, pods' network namespaces and veths;
# - net.ipv4.conf.$BRIDGE.route_localnet=1, and the sysctls the kubelet
#   rewrites at start (kernel.panic, vm.overcommit_memory, ...), saved first;
# - iptables nat rules, all matching only packets that arrive on $BRIDGE
#   (comment tributary-node): $GATEWAY:<test service port> -> 127.0.0.1 so pods
#   reach the loopback test services, and the kubernetes Service address ->
#   this apiserver (there is no kube-proxy); a filter rule dropping anything a
#   pod would send beyond the bridge, so no test packet leaves the machine;
# - mounts and cgroups of the kubelet and containerd, kubelet's log links.
# net.ipv4.ip_forward stays 0: pods only talk to each other (bridged) and to
# the host's own addresses, which needs no routing.
source "$(dirname "$0")/lib.sh"

BUILD_DIR="$TESTENV_ROOT/scripts/testenv/kube-build"
# Resolved: mounts are listed in /proc/mounts by their real path (.testenv may be a link).
NODE_DIR="$(realpath -m "$TESTENV_DATA/node")"
PKI="$NODE_DIR/pki"
KUBE_VERSION="$(mod_version k8s.io/kubernetes "$BUILD_DIR/apiserver/go.mod")"
NODE_BUILD_VERSION="$(mod_version k8s.io/kubernetes "$BUILD_DIR/node/go.mod")"
[ "$NODE_BUILD_VERSION" = "$KUBE_VERSION" ] || {
  echo "testenv: kube-build/node pins $NODE_BUILD_VERSION, kube-build/apiserver $KUBE_VERSION" >&2
  exit 1
}
ETCD_VERSION="$(mod_version go.etcd.io/etcd/server/v3 "$BUILD_DIR/etcd/go.mod")"
KUBE_BIN="$TESTENV_CACHE/kube-$KUBE_VERSION"
ETCD="$TESTENV_CACHE/etcd-$ETCD_VERSION/etcd"
NODE_NAME=tributary-node
BRIDGE=tribnode0
POD_CIDR="$TESTENV_NODE_POD_CIDR"
GATEWAY="$TESTENV_NODE_GATEWAY"
SERVICE_CIDR=10.213.1.0/24
# The `kubernetes` Service: the first address of SERVICE_CIDR.
KUBERNETES_SERVICE_IP=10.213.1.1
CNI_NETWORK=tributary-node
RULE_TAG=tributary-node
SERVER="https://127.0.0.1:$TESTENV_NODE_APISERVER_PORT"
ETCD_URL="http://127.0.0.1:$TESTENV_NODE_ETCD_CLIENT_PORT"
SOCK="$NODE_DIR/containerd/containerd.sock"
# containerd's content store and image snapshots outlive `down` (like the
# built programs), so the next `up` need not import the images again; its
# state (tasks, mounts, sockets) lives in $NODE_DIR and goes with `down`.
CONTAINERD_ROOT="$TESTENV_CACHE/node-containerd"
# Test services pods may reach on $GATEWAY (nothing else of the host's loopback).
POD_REACHABLE_PORTS="$TESTENV_PG_PORT,$TESTENV_CH_HTTP_PORT,$TESTENV_CH_NATIVE_PORT,$TESTENV_KAFKA_POD_PORT,$TESTENV_SNOWFLAKE_PORT"
# Sysctls the kubelet (and a CNI gateway) may rewrite: restored by `down`.
SAVED_SYSCTLS=(kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Host directories the kubelet, containerd or libcni create when missing:
# `down` removes the ones that did not exist before the first `up` (with what
# the node put in them: the kubelet's device-plugin socket, log links, ...).
HOST_DIRS=(/var/lib/kubelet /var/log/pods /var/log/containers /run/containerd /var/lib/cni
  /etc/kubernetes /var/lib/containerd /opt/cni)

ctr_k8s() { ctr --address "$SOCK" --namespace k8s.io "$@"; }
kubectl_node() { "$KUBE_BIN/kubectl" --kubeconfig "$NODE_DIR/admin.kubeconfig" "$@"; }

# --- programs ---------------------------------------------------------------

build_programs() {
  local flags name
  [ -x "$ETCD" ] && [ -x "$KUBE_BIN/kube-apiserver" ] && [ -x "$KUBE_BIN/kubectl" ] \
    || "$TESTENV_ROOT/scripts/testenv/kube.sh" build_programs
  mapfile -t flags < <(kube_version_ldflags "$KUBE_VERSION")
  for name in kubelet kube-scheduler kube-controller-manager; do
    build_tool "$BUILD_DIR/node" "k8s.io/kubernetes/cmd/$name" "$KUBE_BIN/$name" "${flags[@]}"
  done
}

require_machine() {
  local missing=()
  [ "$(id -u)" = 0 ] || missing+=("root (the kubelet, containerd and iptables need it)")
  [ -d /sys/fs/cgroup/cpu ] || [ -f /sys/fs/cgroup/cgroup.controllers ] || missing+=("a mounted cgroup hierarchy")
  grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || missing+=("the overlay filesystem")
  if [ "${#missing[@]}" -gt 0 ]; then
    printf 'testenv: the node needs %s\n' "${missing[@]}" >&2
    exit 1
  fi
  apt_install containerd runc containernetworking-plugins iptables iproute2 openssl curl util-linux
  local bin
  for bin in /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback /usr/sbin/runc; do
    [ -x "$bin" ] || { echo "testenv: $bin is missing after installing the Debian packages" >&2; exit 1; }
  done
}

# --- credentials ------------------------------------------------------------

b64() { base64 -w0 <"$1"; }

# write_kubeconfig NAME: NAME.kubeconfig for the client certificate pki/NAME.
write_kubeconfig() {
  cat >"$NODE_DIR/$1.kubeconfig.tmp" <<YAML
apiVersion: v1
kind: Config
clusters:
  - name: node
    cluster:
      server: $SERVER
      certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
  - name: $1
    user:
      client-certificate-data: $(b64 "$PKI/$1.crt")
      client-key-data: $(b64 "$PKI/$1.key")
contexts:
  - name: $1@node
    context:
      cluster: node
      user: $1
      namespace: default
current-context: $1@node
YAML
  chmod 600 "$NODE_DIR/$1.kubeconfig.tmp"
  mv "$NODE_DIR/$1.kubeconfig.tmp" "$NODE_DIR/$1.kubeconfig"
}

KUBECONFIGS=(admin kubelet kube-controller-manager kube-scheduler)

credentials_complete() {
  local name
  for name in ca apiserver apiserver-kubelet-client kubelet-serving "${KUBECONFIGS[@]}"; do
    [ -s "$PKI/$name.crt" ] && [ -s "$PKI/$name.key" ] || return 1
  done
  for name in "${KUBECONFIGS[@]}"; do [ -s "$NODE_DIR/$name.kubeconfig" ] || return 1; done
  [ -s "$PKI/sa.key" ] && [ -s "$PKI/sa.pub" ]
}

ensure_credentials() {
  credentials_complete && return 0
  rm -rf "$PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  tls_ca "$PKI" ca tributary-node-ca
  local server="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth"
  local client="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  tls_issue "$PKI" apiserver ca /CN=kube-apiserver "$server
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:$KUBERNETES_SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  tls_issue "$PKI" kubelet-serving ca "/CN=$NODE_NAME" "$server
subjectAltName=IP:$GATEWAY,DNS:$NODE_NAME"
  tls_issue "$PKI" admin ca /O=system:masters/CN=tributary-node-admin "$client"
  tls_issue "$PKI" apiserver-kubelet-client ca /O=system:masters/CN=kube-apiserver-kubelet-client "$client"
  tls_issue "$PKI" kubelet ca "/O=system:nodes/CN=system:node:$NODE_NAME" "$client"
  tls_issue "$PKI" kube-controller-manager ca /CN=system:kube-controller-manager "$client"
  tls_issue "$PKI" kube-scheduler ca /CN=system:kube-scheduler "$client"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  local name
  for name in "${KUBECONFIGS[@]}"; do write_kubeconfig "$name"; done
}

# --- configuration files ----------------------------------------------------

write_configs() {
  mkdir -p "$NODE_DIR/containerd" "$NODE_DIR/cni/net.d" "$NODE_DIR/kubelet"
  # restrict_oom_score_adj: root without CAP_SYS_RESOURCE (as on these VMs)
  # may not lower a process's oom_score_adj, which the kubelet asks for every
  # pod sandbox; without it no pod starts ("can't get final child's PID from
  # pipe"). SystemdCgroup=false matches the kubelet's cgroupfs driver.
  cat >"$NODE_DIR/containerd/config.toml" <<TOML
version = 2
root = "$CONTAINERD_ROOT"
state = "$NODE_DIR/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = "$NODE_DIR/containerd/debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(cat "$NODE_DIR/images/pause.ref" 2>/dev/null || echo unset)"
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = "$NODE_DIR/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni/net.d"
TOML
  # isGateway false: the bridge already holds $GATEWAY (made by setup_network),
  # and a gateway bridge would turn net.ipv4.ip_forward on.
  cat >"$NODE_DIR/cni/net.d/10-$CNI_NETWORK.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NODE_DIR/cni/ipam",
        "ranges": [[{ "subnet": "$POD_CIDR", "rangeStart": "${GATEWAY%.*}.10", "gateway": "$GATEWAY" }]],
        "routes": [{ "dst": "0.0.0.0/0", "gw": "$GATEWAY" }]
      }
    }
  ]
}
JSON
  # imageGC thresholds at 100%: imported images cannot be pulled back.
  # resolvConf "": pods get no name servers (there is no cluster DNS, and a
  # lookup must not leave the machine). The node address is the bridge's, so
  # nothing of the node listens on the machine's external interface.
  cat >"$NODE_DIR/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $PKI/ca.crt }
authorization: { mode: Webhook }
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
address: $GATEWAY
port: $TESTENV_NODE_KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $TESTENV_NODE_KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: { memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1% }
serializeImagePulls: false
podLogsDir: $NODE_DIR/kubelet/pod-logs
YAML
}

# --- host network -----------------------------------------------------------

# nat_rule TABLE CHAIN ARGS...: appends the rule (tagged) unless it is there.
nat_rule() {
  local table="$1" chain="$2"; shift 2
  iptables -t "$table" -C "$chain" "$@" -m comment --comment "$RULE_TAG" 2>/dev/null \
    || iptables -t "$table" -A "$chain" "$@" -m comment --comment "$RULE_TAG"
}

setup_network() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr show dev "$BRIDGE" | grep -q "inet $GATEWAY/" || ip addr add "$GATEWAY/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Lets packets that arrived on the bridge be delivered to 127.0.0.1 after DNAT.
  sysctl -qw "net.ipv4.conf.$BRIDGE.route_localnet=1"
  # A pod dialling $GATEWAY:<port> reaches the host's 127.0.0.1:<port>, only for the test services.
  nat_rule nat PREROUTING -i "$BRIDGE" -d "$GATEWAY" -p tcp -m multiport --dports "$POD_REACHABLE_PORTS" \
    -j DNAT --to-destination 127.0.0.1
  # ... and the server sees 127.0.0.1 as the client (the test PostgreSQL trusts only that).
  nat_rule nat INPUT -s "$POD_CIDR" -d 127.0.0.1 -p tcp -j SNAT --to-source 127.0.0.1
  # In-cluster clients dial the kubernetes Service; without kube-proxy this is the only Service that routes.
  nat_rule nat PREROUTING -i "$BRIDGE" -d "$KUBERNETES_SERVICE_IP" -p tcp --dport 443 \
    -j DNAT --to-destination "127.0.0.1:$TESTENV_NODE_APISERVER_PORT"
  # Nothing from a pod is routed beyond the bridge, whatever ip_forward says.
  iptables -C FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP -m comment --comment "$RULE_TAG" 2>/dev/null \
    || iptables -I FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP -m comment --comment "$RULE_TAG"
}

remove_rules() {
  local table chain rule
  for table in nat filter; do
    for chain in PREROUTING INPUT OUTPUT POSTROUTING FORWARD; do
      { iptables -t "$table" -S "$chain" 2>/dev/null | grep -F -- "--comment $RULE_TAG" || true; } | sed 's/^-A //' \
        | while read -r rule; do eval "iptables -t $table -D $rule"; done
    done
  done
}

save_host_state() {
  [ -s "$NODE_DIR/sysctl.before" ] && return 0
  local key dir
  for key in "${SAVED_SYSCTLS[@]}"; do
    sysctl -n "$key" >/dev/null 2>&1 && echo "$key=$(sysctl -n "$key")"
  done >"$NODE_DIR/sysctl.before.tmp"
  for dir in "${HOST_DIRS[@]}"; do [ -e "$dir" ] || echo "$dir"; done >"$NODE_DIR/dirs.created"
  local tool
  for tool in iptables ip6tables; do
    { "$tool-save" | grep -oE "^:[A-Z][A-Z0-9-]*" || true; } | sort -u >"$NODE_DIR/$tool-chains.before"
  done
  mv "$NODE_DIR/sysctl.before.tmp" "$NODE_DIR/sysctl.before"
}

# --- processes --------------------------------------------------------------

alive() { [ -f "$NODE_DIR/$1.pid" ] && kill -0 "$(cat "$NODE_DIR/$1.pid")" 2>/dev/null; }

spawn() {
  local name="$1"; shift
  # Fd 8 (the node lock) closed: a daemon must not hold it.
  setsid "$@" </dev/null >>"$NODE_DIR/$name.log" 2>&1 8>&- &
  echo $! >"$NODE_DIR/$name.pid"
}

# ensure NAME READY_CHECK SECONDS COMMAND...: starts COMMAND unless its process
# runs and READY_CHECK passes, then waits for READY_CHECK.
ensure() {
  local name="$1" check="$2" seconds="$3"; shift 3
  alive "$name" && "$check" && return 0
  stop_pidfile "$NODE_DIR/$name.pid"
  spawn "$name" "$@"
  if ! wait_for "$name" "$seconds" "$check"; then
    tail -n 30 "$NODE_DIR/$name.log" >&2
    exit 1
  fi
}

etcd_ready() { curl -fs --max-time 2 "$ETCD_URL/health" | grep -q '"health":"true"'; }
apiserver_ready() {
  curl -fs --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$SERVER/readyz" | grep -qx ok
}
containerd_ready() { ctr --address "$SOCK" version >/dev/null; }
healthz() { curl -fsk --max-time 2 "https://127.0.0.1:$1/healthz" | grep -qx ok; }
controller_manager_ready() { healthz "$TESTENV_NODE_CONTROLLER_MANAGER_PORT"; }
scheduler_ready() { healthz "$TESTENV_NODE_SCHEDULER_PORT"; }
kubelet_ready() { curl -fs --max-time 2 "http://127.0.0.1:$TESTENV_NODE_KUBELET_HEALTHZ_PORT/healthz" | grep -qx ok; }
node_ready() {
  [ "$(kubectl_node get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
default_service_account() { kubectl_node -n default get serviceaccount default; }

refuse_foreign_port() {
  if port_open "$2"; then
    echo "testenv: 127.0.0.1:$2 is taken by a process this checkout did not start ($1)" >&2
    exit 1
  fi
}

start_processes() {
  alive etcd || refuse_foreign_port etcd "$TESTENV_NODE_ETCD_CLIENT_PORT"
  alive kube-apiserver || refuse_foreign_port kube-apiserver "$TESTENV_NODE_APISERVER_PORT"
  mkdir -p "$NODE_DIR/etcd"
  chmod 700 "$NODE_DIR/etcd"
  ensure containerd containerd_ready 30 containerd --config "$NODE_DIR/containerd/config.toml"
  local import_start=$SECONDS
  "$TESTENV_ROOT/scripts/testenv/image.sh" import "$SOCK"
  TIMINGS+=("image import $((SECONDS - import_start))s")
  local control_start=$SECONDS
  ensure etcd etcd_ready 60 "$ETCD" --name node --data-dir "$NODE_DIR/etcd" \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "http://127.0.0.1:$TESTENV_NODE_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$TESTENV_NODE_ETCD_PEER_PORT" \
    --initial-cluster "node=http://127.0.0.1:$TESTENV_NODE_ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level warn
  # The endpoint reconciler is off: this apiserver listens on loopback, which
  # Endpoints may not hold; the DNAT rule stands in for the kubernetes Service.
  ensure kube-apiserver apiserver_ready 180 "$KUBE_BIN/kube-apiserver" --etcd-servers "$ETCD_URL" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --secure-port "$TESTENV_NODE_APISERVER_PORT" --cert-dir "$NODE_DIR/apiserver-certs" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --endpoint-reconciler-type none \
    --allow-privileged=true --profiling=false
  # --authentication-skip-lookup: there is no front-proxy CA to look up.
  local kcm="$NODE_DIR/kube-controller-manager.kubeconfig" sched="$NODE_DIR/kube-scheduler.kubeconfig"
  ensure kube-controller-manager controller_manager_ready 60 "$KUBE_BIN/kube-controller-manager" \
    --kubeconfig "$kcm" --authentication-kubeconfig "$kcm" --authorization-kubeconfig "$kcm" \
    --authentication-skip-lookup --bind-address 127.0.0.1 \
    --secure-port "$TESTENV_NODE_CONTROLLER_MANAGER_PORT" --leader-elect=false \
    --use-service-account-credentials=true --service-account-private-key-file "$PKI/sa.key" \
    --root-ca-file "$PKI/ca.crt" --cluster-signing-cert-file "$PKI/ca.crt" \
    --cluster-signing-key-file "$PKI/ca.key" --service-cluster-ip-range "$SERVICE_CIDR" \
    --controllers '*'
  ensure kube-scheduler scheduler_ready 60 "$KUBE_BIN/kube-scheduler" \
    --kubeconfig "$sched" --authentication-kubeconfig "$sched" --authorization-kubeconfig "$sched" \
    --authentication-skip-lookup --bind-address 127.0.0.1 \
    --secure-port "$TESTENV_NODE_SCHEDULER_PORT" --leader-elect=false
  TIMINGS+=("control plane $((SECONDS - control_start))s")
  local kubelet_start=$SECONDS
  ensure kubelet kubelet_ready 60 "$KUBE_BIN/kubelet" --config "$NODE_DIR/kubelet/config.yaml" \
    --kubeconfig "$NODE_DIR/kubelet.kubeconfig" --root-dir "$NODE_DIR/kubelet/root" \
    --cert-dir "$NODE_DIR/kubelet/pki" --hostname-override "$NODE_NAME" --node-ip "$GATEWAY" --v=1
  wait_for "node $NODE_NAME Ready" 120 node_ready || { tail -n 30 "$NODE_DIR/kubelet.log" >&2; exit 1; }
  # Pods are refused until the controller-manager made the namespace's ServiceAccount.
  wait_for "default ServiceAccount" 60 default_service_account
  TIMINGS+=("kubelet to a Ready node $((SECONDS - kubelet_start))s")
}

# What the suites read: where the node is and which image to run.
write_facts() {
  cat >"$NODE_DIR/node.json.tmp" <<JSON
{
  "kubeconfig": "$NODE_DIR/admin.kubeconfig",
  "server": "$SERVER",
  "nodeName": "$NODE_NAME",
  "gateway": "$GATEWAY",
  "podCidr": "$POD_CIDR",
  "containerdSocket": "$SOCK",
  "image": "$(cat "$NODE_DIR/images/tributary.ref")"
}
JSON
  mv "$NODE_DIR/node.json.tmp" "$NODE_DIR/node.json"
}

healthy() {
  local name
  for name in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    alive "$name" || return 1
  done
  credentials_complete && apiserver_ready && node_ready \
    && "$TESTENV_ROOT/scripts/testenv/image.sh" current "$SOCK"
}

up() {
  if [ -f "$NODE_DIR/node.json" ] && healthy 2>/dev/null; then
    status_line node "ready on $SERVER (already running)"
    return 0
  fi
  local start=$SECONDS
  TIMINGS=()
  require_machine
  build_programs
  mkdir -p "$NODE_DIR"
  local build_start=$SECONDS
  "$TESTENV_ROOT/scripts/testenv/image.sh" build
  TIMINGS+=("programs and images $((SECONDS - build_start))s")
  ensure_credentials
  save_host_state
  write_configs
  setup_network
  start_processes
  write_facts
  status_line node "ready on $SERVER (kubelet $KUBE_VERSION, $(containerd --version | awk '{print $1, $3}'))"
  local IFS=,
  status_line node "up in $((SECONDS - start))s:${TIMINGS[*]/#/ }"
}

# --- teardown ---------------------------------------------------------------

# remove_kubelet_chains iptables|ip6tables: the KUBE-* chains the kubelet made
# at start (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) and the
# jumps to them, leaving alone any that existed before the first `up`.
remove_kubelet_chains() {
  local tool="$1" before="$NODE_DIR/$1-chains.before" table chain rule
  [ -f "$before" ] || return 0
  for table in filter nat mangle; do
    { "$tool" -t "$table" -S 2>/dev/null | grep -oE '^-N KUBE-[A-Z0-9-]+' || true; } | awk '{print $2}' | while read -r chain; do
      grep -qx ":$chain" "$before" && continue
      { "$tool" -t "$table" -S 2>/dev/null | grep -E "^-A [A-Z]+ .*-j $chain( |$)" || true; } | sed 's/^-A //' \
        | while read -r rule; do eval "$tool -t $table -D $rule" || true; done
      "$tool" -t "$table" -F "$chain" 2>/dev/null || true
      "$tool" -t "$table" -X "$chain" 2>/dev/null || true
    done
  done
}

# Kills every container of this containerd and removes the network namespaces
# its pod sandboxes used (no CNI DEL runs: the bridge and IPAM state go below).
remove_containers() {
  [ -S "$SOCK" ] && containerd_ready || return 0
  local id netns
  for id in $(ctr_k8s containers ls -q 2>/dev/null); do
    netns="$(ctr_k8s containers info "$id" 2>/dev/null \
      | grep -oE '"path": *"/(var/)?run/netns/cni-[0-9a-f-]+"' | grep -oE '/(var/)?run/netns/[^"]+')" || true
    [ -n "$netns" ] && echo "$netns" >>"$NODE_DIR/netns.used"
    echo "$id" >>"$NODE_DIR/containers.used"
    ctr_k8s tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
    wait_for "container $id to stop" 15 sh -c "! ctr --address '$SOCK' -n k8s.io tasks ls -q | grep -qx '$id'" || true
    ctr_k8s tasks rm -f "$id" >/dev/null 2>&1 || true
  done
  for id in $(ctr_k8s containers ls -q 2>/dev/null); do ctr_k8s containers rm "$id" >/dev/null 2>&1 || true; done
}

down() {
  [ -d "$NODE_DIR" ] || { status_line node stopped; return 0; }
  # Controllers first, so nothing re-creates pods while they are removed.
  stop_pidfile "$NODE_DIR/kube-controller-manager.pid"
  stop_pidfile "$NODE_DIR/kube-scheduler.pid"
  stop_pidfile "$NODE_DIR/kubelet.pid"
  remove_containers
  stop_pidfile "$NODE_DIR/containerd.pid"
  stop_pidfile "$NODE_DIR/kube-apiserver.pid"
  stop_pidfile "$NODE_DIR/etcd.pid"
  # Mounts under the node's directory (volumes, rootfs, the kubelet's bind
  # mount of its root) and the pods' network namespaces, deepest first.
  local mount netns
  { awk '{print $2}' /proc/mounts | grep -E "^$NODE_DIR/" || true; } | sort -r | while read -r mount; do
    umount "$mount" 2>/dev/null || umount -l "$mount"
  done
  if [ -f "$NODE_DIR/netns.used" ]; then
    sed 's#^/var/run/#/run/#' "$NODE_DIR/netns.used" | sort -u | while read -r netns; do
      umount "$netns" 2>/dev/null || true
      rm -f "$netns"
    done
  fi
  ip link delete "$BRIDGE" 2>/dev/null || true
  remove_rules
  remove_kubelet_chains iptables
  remove_kubelet_chains ip6tables
  if [ -s "$NODE_DIR/sysctl.before" ]; then
    local line
    while read -r line; do sysctl -qw "$line" || true; done <"$NODE_DIR/sysctl.before"
  fi
  # The kubelet's cgroups (empty once the containers are gone), deepest first.
  local cgroup
  for cgroup in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$cgroup" ] && { find "$cgroup" -depth -type d -exec rmdir {} \; 2>/dev/null || true; }
  done
  find /var/log/containers -maxdepth 1 \( -lname "$NODE_DIR/*" -o -lname "$TESTENV_DATA/node/*" \) -delete 2>/dev/null || true
  # libcni's result cache: <network>-<sandbox id>-<interface>, for this node's sandboxes only.
  if [ -f "$NODE_DIR/containers.used" ]; then
    local id
    while read -r id; do
      rm -f /var/lib/cni/results/"$CNI_NETWORK-$id"-* /var/lib/cni/results/cni-loopback-"$id"-*
    done <"$NODE_DIR/containers.used"
  fi
  # Directories that did not exist before the first `up` hold only what this
  # node put there (the kubelet's device-plugin socket, log links, ...).
  if [ -f "$NODE_DIR/dirs.created" ]; then
    local dir
    while read -r dir; do rm -rf "$dir"; done <"$NODE_DIR/dirs.created"
  fi
  rm -rf "$NODE_DIR"
  status_line node stopped
}

# One node per machine (one bridge, one set of ports): `up` and `down` of any
# checkout wait for each other.
if [ "${1:-}" = up ] || [ "${1:-}" = down ]; then
  apt_install util-linux
  exec 8>"$TESTENV_CACHE/.node.lock"
  flock 8
fi
"${1:?usage: node.sh up|down}"
