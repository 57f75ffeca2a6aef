# Strata: `make run` starts a local cluster, `make test` runs the whole suite.
# Both install what they need on a fresh machine (a venv from PyPI; Debian and npm packages are
# added here as later parts need them).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: help install test lint typecheck unit run bench clean compatibility

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install Strata with every extra (pip install -e '.[all]')
lint: $(STAMP) ## ruff over the whole tree
	$(BIN)/ruff check .

typecheck: $(STAMP) ## mypy --strict over every strata package
	$(BIN)/mypy

test: lint typecheck node-deps etcd prometheus chromium ## lint, types and every test (installs what it needs)
	$(BIN)/pytest -q --durations=25

unit: $(STAMP) ## unit tests only (tests/unit)
	$(BIN)/pytest -q tests/unit

# A local cluster on the embedded default (data in ./.strata-data); Ctrl-C stops it.
run: $(STAMP) ## a local 3-broker cluster + admin API on the embedded store; Ctrl-C stops it
	$(BIN)/strata dev

# The storage benchmark, then the suite (Strata, Redis Streams, NATS JetStream): mk/bench.mk.
bench: $(STAMP)

# docs/compatibility.md from the handler registry, kio and the installed clients (a test checks it).
compatibility: $(STAMP) node-deps ## regenerate docs/compatibility.md (served API versions per client)
	$(BIN)/python -m strata.broker.compatibility_ledger --write docs/compatibility.md

clean: ## remove .venv, build/ and .strata-data
	rm -rf $(VENV) build .strata-data

# Every target with a `## description` on its rule line, here and in mk/*.mk.
help: ## list the targets
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z0-9_.-]+:[^#]*## / {printf "  %-14s %s\n", $$1, $$2}' \
	  $(MAKEFILE_LIST)

# kafkajs and its codecs for the real-client matrix (tests/integration/clients), pinned exactly in
# tests/integration/js/package-lock.json; the native codecs (lz4, zstd-napi) build with node-gyp.
JS_DIR := tests/integration/js
NODE_STAMP := $(JS_DIR)/node_modules/.installed-stamp
.PHONY: node-deps

$(NODE_STAMP): $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

node-deps: $(NODE_STAMP) ## kafkajs and its codecs for the real-client matrix (npm ci)
# Debian's etcd-server for the metadata-store contract suite (tests/integration/metadata); installed
# only where `etcd` is not already on PATH.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
.PHONY: etcd

etcd: ## Debian's etcd-server, where etcd is missing
	@command -v etcd >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; }

# Debian's prometheus for promtool (alert-rule tests) and, later, the dashboard tests; installed
# only where promtool is not already on PATH.
.PHONY: prometheus

prometheus: ## Debian's prometheus (promtool), where missing
	@command -v promtool >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }

# Debian's chromium for the web console's browser tests (tests/integration/console, driven by
# Playwright with executable_path); installed only where chromium is not already on PATH.
.PHONY: chromium

chromium: ## Debian's chromium (the console's browser tests), where missing
	@command -v chromium >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Each part that needs more set-up (Spark, the operator, the admin service, ...) keeps its own
# targets in mk/<part>.mk; a part adds itself to `make test` with `test: <its-target>`.
-include mk/*.mk
