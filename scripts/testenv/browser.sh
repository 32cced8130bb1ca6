#!/usr/bin/env bash
# Debian's Chromium, for the console's browser test (driven by playwright-core
# through its executablePath: no browser download, which cannot be had here).
# Nothing runs until a test starts it, so `down` has nothing to stop.
source "$(dirname "$0")/lib.sh"
CHROMIUM=/usr/bin/chromium

up() {
  if [ -x "$CHROMIUM" ]; then
    status_line browser "ready ($("$CHROMIUM" --version 2>/dev/null | head -1))"
    return 0
  fi
  apt_install chromium
  status_line browser "installed ($("$CHROMIUM" --version 2>/dev/null | head -1))"
}

down() { :; }

"${1:?usage: browser.sh up|down}"
