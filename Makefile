# Strata: `make run` starts a local cluster, `make test` runs the whole suite.
# Both install what they need on a fresh machine (a venv from PyPI; Debian and npm packages are
# added here as later parts need them).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Folder -> import-name symlinks so mypy sees strata.* (see [tool.mypy] in pyproject.toml).
TYPECHECK := build/typecheck/strata
PKG_LINKS := storage:storage protocol:services/protocol

.PHONY: install test lint typecheck unit run bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	@mkdir -p $(TYPECHECK)
	@for pair in $(PKG_LINKS); do \
	  name=$${pair%%:*}; dir=$${pair#*:}; \
	  ln -sfn "$(CURDIR)/$$dir" "$(TYPECHECK)/$$name"; \
	done
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -q

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

run: $(STAMP)
	@echo "make run starts the local cluster once the broker lands (issue: the broker)." >&2
	@exit 2

bench: $(STAMP)
	$(BIN)/python bench/storage.py

clean:
	rm -rf $(VENV) build .strata-data
