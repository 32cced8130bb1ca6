# Shared helpers for scripts/testenv/*.sh. Sourced, never run.
set -euo pipefail
TESTENV_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Per-checkout state: data directories, logs, pid files, generated credentials.
TESTENV_DATA="$TESTENV_ROOT/.testenv"
# Per-machine cache: downloaded and built programs, shared by every clone.
TESTENV_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tributary/testenv"
# shellcheck source=ports.env
source "$TESTENV_ROOT/scripts/testenv/ports.env"
mkdir -p "$TESTENV_DATA" "$TESTENV_CACHE"
# The real node's pod network (node.sh): its bridge holds the gateway address,
# on which pods reach the test services (kafka.sh advertises a listener there).
TESTENV_NODE_POD_CIDR=10.213.0.0/24
TESTENV_NODE_GATEWAY=10.213.0.1

status_line() { printf 'testenv %-11s %s\n' "$1" "$2"; }

# The PostgreSQL ports (55xxx) lie in Linux's ephemeral range (32768–60999 by
# default): a server started after many connections were opened, or restarted
# by a test, found its port taken by some client's outgoing connection
# ("could not bind … Address already in use"; seen with kube-apiserver's
# connection to etcd). Reserving them keeps the kernel from handing them out
# as source ports. Needs root; without it the ports are merely likely free.
reserve_test_ports() {
  local file=/proc/sys/net/ipv4/ip_local_reserved_ports
  [ -w "$file" ] || return 0
  local low high wanted=() name
  read -r low high </proc/sys/net/ipv4/ip_local_port_range
  for name in $(compgen -v TESTENV_ | grep '_PORT$'); do
    local port="${!name}"
    if [ "$port" -ge "$low" ] && [ "$port" -le "$high" ]; then wanted+=("$port"); fi
  done
  local current missing=() port item
  current="$(cat "$file")"
  for port in "${wanted[@]}"; do
    local reserved=false
    for item in ${current//,/ }; do
      if [ "$port" -ge "${item%-*}" ] && [ "$port" -le "${item#*-}" ]; then reserved=true; fi
    done
    $reserved || missing+=("$port")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  echo "${current:+$current,}$(IFS=,; echo "${missing[*]}")" >"$file" 2>/dev/null || true
}
reserve_test_ports

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for NAME SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
  local name="$1" seconds="$2"; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "testenv: $name did not become ready within ${seconds}s" >&2
      return 1
    fi
    sleep 0.2
  done
}

apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=120 update -qq >/dev/null
  apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# stop_pidfile FILE: stops the process recorded in FILE, if it still runs.
stop_pidfile() {
  local file="$1" pid
  [ -f "$file" ] || return 0
  pid="$(cat "$file")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

# Test certificates (openssl must be installed).
# tls_issue DIR NAME CA SUBJECT EXTENSIONS: a P-256 key and a certificate signed by CA.
tls_issue() {
  local dir="$1" name="$2" ca="$3" subject="$4" extensions="$5"
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/$name.key" 2>/dev/null
  openssl req -new -key "$dir/$name.key" -subj "$subject" -out "$dir/$name.csr" 2>/dev/null
  printf '%s\n' "$extensions" >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

# tls_ca DIR NAME COMMON_NAME: a P-256 certificate authority DIR/NAME.{key,crt}.
tls_ca() {
  openssl ecparam -name prime256v1 -genkey -noout -out "$1/$2.key" 2>/dev/null
  openssl req -x509 -new -key "$1/$2.key" -subj "/CN=$3" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$1/$2.crt" 2>/dev/null
}

# --- Go builds of pinned programs (kube.sh, node.sh) --------------------------

# The Go release to fetch from the module proxy when no local Go is new enough
# (etcd 3.5.35's go.mod asks for go 1.26.0).
GO_MIN=1.26.0
GO_FETCH=go1.26.8

mod_version() { grep -oE "^(require )?[[:space:]]*$1 v[0-9][^ ]*" "$2" | awk '{print $NF}'; }

go_new_enough() {
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  [ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -1)" = "$GO_MIN" ]
}

# Prints the path of a Go toolchain >= GO_MIN: the one on PATH, /usr/local/go,
# or else the official release unpacked from the module proxy's
# golang.org/toolchain module into the machine-wide cache.
find_go() {
  local candidate
  for candidate in "$(command -v go || true)" /usr/local/go/bin/go "$TESTENV_CACHE/$GO_FETCH/bin/go"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && go_new_enough "$candidate"; then
      echo "$candidate"
      return 0
    fi
  done
  apt_install curl unzip ca-certificates
  local arch proxy tmp
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch="$(uname -m)" ;; esac
  proxy="${GOPROXY:-https://proxy.golang.org}"; proxy="${proxy%%,*}"; proxy="${proxy%%|*}"
  [[ "$proxy" == http* ]] || proxy=https://proxy.golang.org
  tmp="$(mktemp -d)"
  curl -fsSL "$proxy/golang.org/toolchain/@v/v0.0.1-$GO_FETCH.linux-$arch.zip" -o "$tmp/go.zip"
  unzip -q "$tmp/go.zip" -d "$tmp"
  rm -rf "${TESTENV_CACHE:?}/$GO_FETCH"
  mv "$tmp/golang.org/toolchain@v0.0.1-$GO_FETCH.linux-$arch" "$TESTENV_CACHE/$GO_FETCH"
  chmod +x "$TESTENV_CACHE/$GO_FETCH/bin/"* "$TESTENV_CACHE/$GO_FETCH/pkg/tool/"*/* 2>/dev/null || true
  rm -rf "$tmp"
  echo "$TESTENV_CACHE/$GO_FETCH/bin/go"
}

# build_tool MODULE_DIR PACKAGE OUTPUT [LDFLAGS...]: builds PACKAGE as pinned by
# MODULE_DIR/go.mod into OUTPUT, unless OUTPUT exists. Serialised machine-wide
# with flock; the binary appears atomically, so concurrent checkouts are safe.
build_tool() {
  local module="$1" package="$2" output="$3"; shift 3
  [ -x "$output" ] && return 0
  apt_install util-linux
  mkdir -p "$(dirname "$output")"
  exec 9>"$TESTENV_CACHE/.kube-build.lock"
  flock 9
  if [ ! -x "$output" ]; then
    local go start
    go="$(find_go)"
    start=$SECONDS
    echo "testenv: building $(basename "$output") ($package) with $("$go" env GOVERSION); the first build takes minutes" >&2
    (
      cd "$module" || exit 1
      GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
        "$go" build -trimpath -ldflags "-s -w $*" -o "$output.tmp.$$" "$package"
    )
    mv -f "$output.tmp.$$" "$output"
    echo "testenv: built $output in $((SECONDS - start))s" >&2
  fi
  exec 9>&-
}

# kube_version_ldflags VERSION: the -X flags, one a line, that make a Kubernetes
# program built outside its repository report VERSION (as its own build does).
kube_version_ldflags() {
  local major minor rest pkg
  major="${1#v}"; major="${major%%.*}"
  rest="${1#v*.}"; minor="${rest%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf '%s\n' "-X $pkg.gitVersion=$1" "-X $pkg.gitMajor=$major" "-X $pkg.gitMinor=$minor" \
      "-X $pkg.gitTreeState=clean"
  done
}
