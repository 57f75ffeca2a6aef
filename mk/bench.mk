# The benchmark suite (bench/suite.py): Strata against Redis Streams and NATS JetStream in
# one run. Debian's redis-server (with redis-tools: redis-benchmark) and nats-server are installed
# only where missing; `make test` needs them too (tests/integration/bench). Debian puts
# nats-server in /usr/sbin, so that is checked as well as PATH.
.PHONY: bench-deps redis-server nats-server bench-storage bench-suite bench-quick

redis-server: ## Debian's redis-server and redis-tools, where missing
	@{ command -v redis-server && command -v redis-benchmark; } >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools \
	    >/dev/null; }

nats-server: ## Debian's nats-server, where missing
	@{ command -v nats-server || test -x /usr/sbin/nats-server; } >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null; }

bench-deps: $(STAMP) redis-server nats-server ## the venv and the benchmark suite's peer servers
# One run, 1,000,000 records of 100 bytes per system (`python -m bench.suite --help` for the flags).
bench-suite: bench-deps ## the benchmark suite alone: Strata, Redis Streams, NATS JetStream
	$(BIN)/python -m bench.suite

# The same with 100,000 records, for smoke use.
bench-quick: bench-deps ## the benchmark suite with 100,000 records (smoke use)
	$(BIN)/python -m bench.suite --quick

# Raw write/append/read/recovery throughput of the storage engine alone (no servers).
bench-storage: $(STAMP) ## the storage engine's own throughput (no servers)
	$(BIN)/python -m bench.storage

# `make bench` runs the suite as its own recipe (the root Makefile's `bench:` has none), so it
# comes after every fragment's `bench: <target>` prerequisite and its table is printed last.
bench: bench-storage bench-deps ## every benchmark: storage, Spark, then the suite (docs/benchmarks.md)
	$(BIN)/python -m bench.suite

test: redis-server nats-server
