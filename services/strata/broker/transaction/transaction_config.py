"""``TransactionConfig``: the transaction coordinator's settings, by Kafka's names and defaults.

Kafka's ``TransactionLogConfig`` and ``TransactionStateManagerConfig``:

==============================================================  =========  =================
key                                                             default    meaning
==============================================================  =========  =================
``transaction.state.log.num.partitions``                        50         topic partitions
``transaction.state.log.replication.factor``                    3          its replication
``transaction.state.log.min.isr``                               2          min.insync.replicas
``transaction.state.log.segment.bytes``                         104857600  its segment.bytes
``transaction.max.timeout.ms``                                  900000     largest timeout
``transactional.id.expiration.ms``                              604800000  idle id forgotten
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` 10000      timeout scan period
``transaction.remove.expired.transaction.cleanup.interval.ms``  3600000    expiration period
``transaction.version``                                         2          feature level
``transaction.partition.verification.enable``                   true       KIP-890 checks
==============================================================  =========  =================

``transaction.version`` is a finalized feature in Kafka (``kafka-features.sh``; 2 on a new
4.x cluster); Strata reads it as a broker setting. Immutable.
"""

from __future__ import annotations

from dataclasses import dataclass

from strata.broker.config import BrokerConfig
from strata.broker.transaction.transaction_version import TransactionVersion


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_insync_replicas: int = 2
    segment_bytes: int = 100 * 1024 * 1024
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 60 * 60 * 1000
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3_600_000
    transaction_version: TransactionVersion = TransactionVersion.TV_2
    partition_verification_enable: bool = True

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TransactionConfig:
        return cls(
            num_partitions=config.get_int("transaction.state.log.num.partitions"),
            replication_factor=config.get_int("transaction.state.log.replication.factor"),
            min_insync_replicas=config.get_int("transaction.state.log.min.isr"),
            segment_bytes=config.get_int("transaction.state.log.segment.bytes"),
            transaction_max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            transactional_id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
            abort_timed_out_transactions_interval_ms=config.get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_transactional_ids_interval_ms=config.get_int(
                "transaction.remove.expired.transaction.cleanup.interval.ms"),
            transaction_version=TransactionVersion.from_feature_level(
                config.get_int("transaction.version")),
            partition_verification_enable=config.get_bool(
                "transaction.partition.verification.enable"),
        )

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        """Kafka's rule: ``0 < transaction.timeout.ms <= transaction.max.timeout.ms``."""
        return 0 < txn_timeout_ms <= self.transaction_max_timeout_ms
