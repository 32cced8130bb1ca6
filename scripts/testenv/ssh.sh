#!/usr/bin/env bash
# OpenSSH server for SSH-tunnel tests: 127.0.0.1:$TESTENV_SSH_PORT, a test user
# that accepts both a generated ed25519 key and a password, TCP forwarding on.
source "$(dirname "$0")/lib.sh"
SSH_DIR="$TESTENV_DATA/ssh"
SSH_USER=tributary-ssh
SSH_PASSWORD=ssh-secret

banner_ok() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$TESTENV_SSH_PORT; head -c 4 <&3" 2>/dev/null | grep -q SSH-; }

up() {
  if [ -f "$SSH_DIR/sshd.pid" ] && kill -0 "$(cat "$SSH_DIR/sshd.pid")" 2>/dev/null && banner_ok; then
    status_line ssh "ready on 127.0.0.1:$TESTENV_SSH_PORT (already running)"
    return 0
  fi
  apt_install openssh-server openssh-client iproute2
  if ! id "$SSH_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$SSH_USER"
  fi
  echo "$SSH_USER:$SSH_PASSWORD" | chpasswd
  mkdir -p "$SSH_DIR" /run/sshd
  [ -f "$SSH_DIR/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/host_ed25519"
  [ -f "$SSH_DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C tributary-test -f "$SSH_DIR/id_ed25519"
  cp "$SSH_DIR/id_ed25519.pub" "$SSH_DIR/authorized_keys"
  chmod 644 "$SSH_DIR/authorized_keys"
  cat >"$SSH_DIR/sshd_config" <<CONF
ListenAddress 127.0.0.1:$TESTENV_SSH_PORT
HostKey $SSH_DIR/host_ed25519
PidFile $SSH_DIR/sshd.pid
AuthorizedKeysFile $SSH_DIR/authorized_keys
StrictModes no
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication yes
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers $SSH_USER
AllowTcpForwarding yes
PermitTTY no
X11Forwarding no
LogLevel VERBOSE
CONF
  /usr/sbin/sshd -t -f "$SSH_DIR/sshd_config"
  /usr/sbin/sshd -f "$SSH_DIR/sshd_config" -E "$SSH_DIR/sshd.log"
  wait_for ssh 15 banner_ok
  status_line ssh "ready on 127.0.0.1:$TESTENV_SSH_PORT ($(ssh -V 2>&1 | cut -d, -f1))"
}

down() {
  stop_pidfile "$SSH_DIR/sshd.pid"
  rm -rf "$SSH_DIR"
  status_line ssh stopped
}

"${1:?usage: ssh.sh up|down}"
