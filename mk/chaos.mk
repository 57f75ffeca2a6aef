# The fault campaign (services/strata/cli/chaos*.py, tests/chaos): 3 brokers on one metadata store
# under three idempotent acks=all producers and a consumer group while a nemesis kills, pauses,
# SIGTERMs, damages segments of and (as root, on etcd) network-partitions them; then the delivery
# reports are checked against a full read and every replica's files (docs/chaos.md). `make test`
# runs a short seed of it (tests/chaos/test_campaign.py). Override CHAOS_FAULTS, CHAOS_SEED,
# CHAOS_KINDS (comma-separated, `all` or `process`) and CHAOS_FLAGS (e.g. --quick).
CHAOS_FAULTS ?= 300
CHAOS_SEED ?=
CHAOS_KINDS ?= all
CHAOS_FLAGS ?=
.PHONY: chaos

# At least 300 faults (gap 5-15 s each: over an hour) and the summary table; exit 1 on any loss.
chaos: $(STAMP) etcd ## the fault campaign: 300 faults (CHAOS_FAULTS, CHAOS_SEED, CHAOS_KINDS, CHAOS_FLAGS) and its table
	$(BIN)/strata chaos run --brokers 3 --faults $(CHAOS_FAULTS) --kinds $(CHAOS_KINDS) \
	  $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) $(CHAOS_FLAGS)
