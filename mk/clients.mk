# Clients the real-client tests need beyond the venv's. Debian's kcat links Debian's own (older)
# librdkafka, the kind of client that decides from Produce's advertised minimum version whether
# the broker takes compressed batches (tests/integration/clients/test_produce_removed_versions.py);
# installed only where kcat is not already on PATH.
.PHONY: kcat

kcat: ## Debian's kcat (and its librdkafka), where missing
	@command -v kcat >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }

test: kcat
