# Strata: `make run` starts a local cluster, `make test` runs the whole suite.
# Both install what they need on a fresh machine (a venv from PyPI; Debian and npm packages are
# added here as later parts need them).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install test lint typecheck unit run bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck node-deps etcd prometheus
	$(BIN)/pytest -q

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

# A local cluster on the embedded default (data in ./.strata-data); Ctrl-C stops it.
run: $(STAMP)
	$(BIN)/strata dev

# The storage benchmark, then issue 10's suite (Strata, Redis Streams, NATS JetStream): mk/bench.mk.
bench: $(STAMP)

clean:
	rm -rf $(VENV) build .strata-data

# kafkajs and its codecs for the real-client matrix (tests/integration/clients), pinned exactly in
# tests/integration/js/package-lock.json; the native codecs (lz4, zstd-napi) build with node-gyp.
JS_DIR := tests/integration/js
NODE_STAMP := $(JS_DIR)/node_modules/.installed-stamp
.PHONY: node-deps

$(NODE_STAMP): $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

node-deps: $(NODE_STAMP)

# Debian's etcd-server for the metadata-store contract suite (tests/integration/metadata); installed
# only where `etcd` is not already on PATH.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
.PHONY: etcd

etcd:
	@command -v etcd >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; }

# Debian's prometheus for promtool (alert-rule tests) and, later, the dashboard tests; installed
# only where promtool is not already on PATH.
.PHONY: prometheus

prometheus:
	@command -v promtool >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }

# Each part that needs more set-up (Spark, the operator, the admin service, ...) keeps its own
# targets in mk/<part>.mk; a part adds itself to `make test` with `test: <its-target>`.
-include mk/*.mk
