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

status_line() { printf 'testenv %-11s %s\n' "$1" "$2"; }

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
