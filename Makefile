# Every target runs on Node 24 (or a system Node >= 22.19): scripts/ensure-node.sh
# brings it from the npm registry into a machine-wide cache when needed.
SHELL := /bin/bash
NODE_BIN := $(shell scripts/ensure-node.sh)
export PATH := $(NODE_BIN):$(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: all deps check fmt crds kind-e2e test test-unit test-integration testenv-up testenv-down start bench clean

all: check

# Installs the locked npm dependencies when package.json or the lock changed.
# `npm install` rather than `npm ci`: the lock cannot list optional platform
# packages (other OSes' binaries of Biome and chdb) that the registry mirror
# these machines use does not serve, and `npm ci` refuses a lock without them.
node_modules/.installed: package.json package-lock.json
	npm install --no-audit --no-fund --loglevel=error
	@touch $@

deps: node_modules/.installed

check: deps
	tsc --noEmit -p tsconfig.json
	biome check .

fmt: deps
	biome check --write .

# Regenerates crds/ from the zod schemas (a test fails when they drift).
crds: deps
	node scripts/generate-crds.ts

testenv-up:
	scripts/testenv/up.sh

testenv-down:
	scripts/testenv/down.sh

# The full suite: lint and type check, then every test against the real services.
# Under scripts/test-watchdog.ts: vitest gets a bounded grace to exit after its
# report, then what is still open is printed and the run fails instead of hanging.
test: deps check testenv-up
	@mkdir -p .testenv
	node scripts/test-watchdog.ts .testenv/vitest-report.json; \
	  status=$$?; node scripts/test-summary.ts .testenv/vitest-report.json .testenv/leftover-processes.json || status=1; \
	  exit $$status

test-unit: deps
	vitest run --project unit

test-integration: deps testenv-up
	vitest run --project integration --project api-cluster

# Standalone mode with its state in $(DATA_DIR). The API password is generated
# on first start into $(DATA_DIR)/api-password (send it with an empty user name).
DATA_DIR ?= .data
start: deps
	@mkdir -p $(DATA_DIR) && chmod 700 $(DATA_DIR)
	@test -s $(DATA_DIR)/api-password || (umask 077 && node -e \
	  "process.stdout.write(require('node:crypto').randomBytes(24).toString('base64url'))" > $(DATA_DIR)/api-password)
	@echo "tributary: API password in $(DATA_DIR)/api-password, e.g. curl -u \":\$$(cat $(DATA_DIR)/api-password)\" ..."
	TRIBUTARY_DATA_DIR=$(DATA_DIR) TRIBUTARY_API_PASSWORD_FILE=$(DATA_DIR)/api-password node bin/tributary.js standalone

bench: deps testenv-up
	node bench/run.ts
	node bench/snowflake.ts

clean:
	rm -rf node_modules .tools

# For machines with Docker: builds the image, creates a kind cluster, installs
# the chart with an in-cluster PostgreSQL for the catalog and as source and
# destination, and runs scripts/kind/e2e.sh: rows arrive, pause and resume, an
# added table, deletion drops the slot. Not run by CI (no Docker engine there);
# test/packaging/kind.test.ts checks its manifests against the test apiserver.
KIND_CLUSTER ?= tributary-e2e
IMAGE ?= tributary:e2e
kind-e2e:
	docker build --build-arg TRIBUTARY_COMMIT=$$(git rev-parse --short=12 HEAD 2>/dev/null) -t $(IMAGE) .
	kind create cluster --name $(KIND_CLUSTER) --wait 120s
	kind load docker-image $(IMAGE) --name $(KIND_CLUSTER)
	IMAGE=$(IMAGE) scripts/kind/e2e.sh; status=$$?; kind delete cluster --name $(KIND_CLUSTER); exit $$status
