"""Replication throttles (KIP-73): Kafka's ``ReplicationQuotaManager``, one for each side.

Owns, for the leader side (``LeaderReplication``) and the follower side
(``FollowerReplication``) of this broker:

* the bound, bytes per second: the dynamic broker configs ``leader.replication.throttled.rate``
  / ``follower.replication.throttled.rate`` (this broker's value over the cluster default over
  Kafka's default, Long.MAX_VALUE = unthrottled);
* the measured rate: Kafka's ``SimpleRate`` over ``replication.quota.window.num`` samples of
  ``replication.quota.window.size.seconds`` (measured over the time since the oldest sample
  began, never less than one window); every byte of a *throttled* partition that crosses this
  broker is recorded, in-sync replicas' included, so the total stays under the bound;
* which partitions are throttled here: the topic configs ``leader.replication.throttled.replicas``
  / ``follower.replication.throttled.replicas``, ``*`` (every replica) or
  ``partition:broker,...`` of which only the entries naming this broker count (Kafka's
  ``TopicConfigHandler.parseThrottledPartitions``).

The rule both sides apply (Kafka's ``shouldLeaderThrottle`` / ``shouldFollowerThrottle``): a
replica is held back only when it is *not in sync* (leader: not in the ISR; follower: behind
the leader's high watermark), its partition is throttled, and the rate is over the bound
(``rate > bound``; a quota is never exceeded before bytes were recorded). An in-sync replica is
never held back, so the ISR, the high watermark and acks=all behave as without throttles.

``check_throttled_replicas`` is Kafka's ``ThrottledReplicaListValidator``. Pure: time is passed
in (``now_ms``); event-loop only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from strata.broker.quotas.sampled_rate import SampledRate

LONG_MAX: Final = 2**63 - 1

LEADER_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_RATE: Final = "follower.replication.throttled.rate"
LEADER_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS: Final = "follower.replication.throttled.replicas"
WINDOW_NUM: Final = "replication.quota.window.num"
WINDOW_SIZE_SECONDS: Final = "replication.quota.window.size.seconds"
DEFAULT_WINDOW_NUM: Final = 11
DEFAULT_WINDOW_SIZE_SECONDS: Final = 1

ALL_REPLICAS: Final = None
"""``throttled`` value of a topic whose every replica is throttled (``*``)."""

_REPLICA: Final = re.compile(r"([0-9]+:[0-9]+)?")


class InvalidThrottledReplicas(ValueError):
    """A ``*.replication.throttled.replicas`` value Kafka refuses (INVALID_CONFIG)."""


def check_throttled_replicas(name: str, value: str) -> str:
    """``value`` if Kafka's ``ThrottledReplicaListValidator`` accepts it, else
    ``InvalidThrottledReplicas`` with Kafka's message."""
    proposed = [item.strip() for item in value.split(",")]
    if not (all(_REPLICA.fullmatch(item) for item in proposed) or "".join(proposed) == "*"):
        raise InvalidThrottledReplicas(
            f"Invalid value {value} for configuration {name}: {name} must be the literal '*' "
            "or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return value


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions ``value`` throttles on ``broker_id`` (``ALL_REPLICAS`` for ``*``)."""
    text = value.strip()
    if "".join(item.strip() for item in text.split(",")) == "*":
        return ALL_REPLICAS
    out = set()
    for item in text.split(","):
        partition, sep, broker = item.strip().partition(":")
        if sep and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class SimpleRate(SampledRate):
    """Kafka's ``SimpleRate``: measured over the time since the oldest sample began, at least
    one window (a ``Rate`` would stretch a young measurement to ``samples - 1`` windows)."""

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        elapsed = now_ms - min(sample.start_ms for sample in self._samples)
        return max(elapsed, self.window_ms)


class ReplicationQuota:
    """One side's quota: Kafka's ``ReplicaQuota`` (``record``, ``is_throttled``,
    ``is_quota_exceeded``) plus what the config handlers call."""

    def __init__(self, replication_type: str, samples: int = DEFAULT_WINDOW_NUM,
                 window_ms: int = DEFAULT_WINDOW_SIZE_SECONDS * 1000) -> None:
        self.replication_type = replication_type  # LeaderReplication / FollowerReplication
        self.bound = LONG_MAX
        self.samples, self.window_ms = samples, window_ms
        # Kafka's sensor is created at its first use (a fetch), not with the broker: a rate
        # measured since start-up would count the quiet time before the first move.
        self._rate: SimpleRate | None = None
        self.recorded_bytes = 0  # total ever recorded (a counter for the metrics)
        self.throttled_count = 0  # times a replica was held back (Strata's counter)
        self._throttled: dict[str, frozenset[int] | None] = {}

    def update_quota(self, bound: int) -> None:
        self.bound = bound

    def set_window(self, samples: int, window_ms: int) -> None:
        """A new window shape (the measurement starts over)."""
        if (samples, window_ms) != (self.samples, self.window_ms):
            self.samples, self.window_ms = samples, window_ms
            self._rate = None

    def _sensor(self, now_ms: int) -> SimpleRate:
        if self._rate is None:
            self._rate = SimpleRate(self.samples, self.window_ms, now_ms)
        return self._rate

    def mark_throttled(self, topic: str, partitions: frozenset[int] | None) -> None:
        self._throttled[topic] = partitions

    def remove_throttle(self, topic: str) -> None:
        self._throttled.pop(topic, None)

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._throttled:
            return False
        partitions = self._throttled[topic]
        return partitions is ALL_REPLICAS or partition in partitions

    def throttled_topics(self) -> Mapping[str, frozenset[int] | None]:
        return self._throttled

    def record(self, size: int, now_ms: int) -> None:
        if size > 0:
            self._sensor(now_ms).record(size, now_ms)
            self.recorded_bytes += size

    def measure(self, now_ms: int) -> float:
        return self._sensor(now_ms).measure(now_ms)

    def is_quota_exceeded(self, now_ms: int) -> bool:
        return self.bound < LONG_MAX and self.measure(now_ms) > self.bound

    def should_throttle(self, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
        """Kafka's ``shouldLeaderThrottle`` / ``shouldFollowerThrottle``; counts the hold."""
        held = (not in_sync and self.is_throttled(topic, partition)
                and self.is_quota_exceeded(now_ms))
        if held:
            self.throttled_count += 1
        return held


class ReplicationQuotas:
    """The two sides of this broker, and how the configs in force set them."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuota("LeaderReplication")
        self.follower = ReplicationQuota("FollowerReplication")

    def configure(self, broker_config: Mapping[str, str],
                  topic_configs: Mapping[str, Mapping[str, str]], now_ms: int) -> None:
        """Apply the broker config in force (static < cluster default < this broker) and every
        topic's overrides (Kafka's ``BrokerConfigHandler`` and ``TopicConfigHandler``).
        Values were validated when they were set; one that does not parse counts as unset."""
        samples = _int(broker_config.get(WINDOW_NUM), DEFAULT_WINDOW_NUM)
        window_ms = _int(broker_config.get(WINDOW_SIZE_SECONDS), DEFAULT_WINDOW_SIZE_SECONDS)
        for quota, rate_key, replicas_key in ((self.leader, LEADER_RATE, LEADER_REPLICAS),
                                              (self.follower, FOLLOWER_RATE, FOLLOWER_REPLICAS)):
            quota.set_window(max(samples, 1), max(window_ms, 1) * 1000)
            quota.update_quota(_int(broker_config.get(rate_key), LONG_MAX))
            for topic in [t for t in quota.throttled_topics() if t not in topic_configs]:
                quota.remove_throttle(topic)
            for topic, configs in topic_configs.items():
                value = configs.get(replicas_key, "").strip()
                try:
                    partitions = throttled_partitions(check_throttled_replicas(
                        replicas_key, value), self.broker_id) if value else frozenset()
                except (InvalidThrottledReplicas, ValueError):
                    partitions = frozenset()
                if partitions is ALL_REPLICAS or partitions:
                    quota.mark_throttled(topic, partitions)
                else:
                    quota.remove_throttle(topic)


def _int(raw: str | None, default: int) -> int:
    if raw is None:
        return default
    try:
        return int(raw.strip())
    except ValueError:
        return default
