# The benchmark suite (bench/suite.py): Strata against Redis Streams and NATS JetStream in
# one run. Debian's redis-server (with redis-tools: redis-benchmark) and nats-server are installed
# only where missing; `make test` needs them too (tests/integration/bench). Debian puts
# nats-server in /usr/sbin, so that is checked as well as PATH.
.PHONY: bench-deps redis-server nats-server bench-storage bench-suite bench-quick
.PHONY: librdkafka-dev native-perf bench-native bench-transactions bench-scale bench-rebalance

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

# The native load generator (bench/native/strata_perf.c, bench/native_client.py) on Debian's
# librdkafka-dev, with a C compiler and pkg-config, installed only where missing (~5 s).
NATIVE_PERF := build/strata_perf

librdkafka-dev: ## Debian's librdkafka-dev, gcc and pkg-config, where missing
	@{ command -v $(CC) && command -v pkg-config && pkg-config --exists rdkafka; } \
	  >/dev/null 2>&1 || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential \
	    pkg-config librdkafka-dev >/dev/null; }

$(NATIVE_PERF): bench/native/strata_perf.c | librdkafka-dev
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra -std=gnu11 -o $@ $< $$(pkg-config --cflags --libs rdkafka)

native-perf: $(NATIVE_PERF) ## build/strata_perf, the native load generator (librdkafka)

# Strata's scenarios (issue 23's table) with the native client, and Redis XADD beside them.
bench-native: bench-deps native-perf ## Strata's scenarios with the native load generator
	$(BIN)/python -m bench.native_client

# Transactional produce against idempotent acks=all, 3 brokers, RF 3, 6 partitions (issue 19).
bench-transactions: $(STAMP) native-perf ## transactional vs idempotent produce (native client)
	$(BIN)/python -m bench.native_client --transactions --producers 1,6

# Issue 23's scale figures (bench/scale.py): 10,000 partitions RF 3 on 3 brokers (READY,
# recovery after kill -9 of every broker, resident memory, Metadata latency), then 20 native
# producers alone and beside 2,000 idle connections. Figures and targets printed, never asserted.
bench-scale: $(STAMP) native-perf ## scale: 10,000 partitions, kill -9 recovery, 2,000 idle connections
	$(BIN)/python -m bench.scale

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
# Strata's rows come from the native client first; the suite's confluent-kafka rows stay as what
# a Python application sees.
bench: bench-storage bench-deps native-perf ## every benchmark: storage, Spark, native, the suite
	$(BIN)/python -m bench.native_client
	$(BIN)/python -m bench.suite

test: redis-server nats-server native-perf

# Issue 20's rebalance figures (bench/rebalance.py): 10 and 50 confluent-kafka members over 100
# partitions, a member joining / leaving / a rolling restart, classic eager and cooperative vs
# KIP-848: time to a stable assignment and each member's processing pause. Never asserted.
bench-rebalance: $(STAMP) ## rebalance time: classic eager / cooperative vs KIP-848 (10, 50 members)
	$(BIN)/python -m bench.rebalance
