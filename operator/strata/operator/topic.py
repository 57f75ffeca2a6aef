"""The ``Topic`` reconcile and deletion: the I/O shell around ``topic_sync``.

Reconcile (on create/update/resume and on a timer, which also reverts changes made directly in
the cluster): find who owns the topic name (older Topic wins; the newer one gets
``ResourceConflict`` and touches nothing), find the Broker, ask Kafka what the topic looks like,
apply ``topic_sync.decide``'s changes through the Kafka admin API (a ``replicas`` change as
AlterPartitionReassignments, re-sent each pass until every partition has that many replicas,
throttled at ``STRATA_OPERATOR_REBALANCE_THROTTLE`` from its first pass until no reassignment
is in progress: ``_throttle``), patch status explicitly (``partitions`` and ``replicas`` as
Kafka has them). A spec Kafka refuses for good (an illegal topic name, more replicas than
brokers) is a condition, not a retry. Every change of the Ready reason is also posted as an
Event (``events.py``).

Deletion (kopf's finalizer): never leaves a namespace stuck. The finalizer is released when
this Topic does not own the topic name, when its Broker is gone or being deleted (the topic's
data goes with the cluster), after the topic was deleted in Kafka, or, with the cluster
unreachable, once ``STRATA_OPERATOR_TOPIC_DELETE_TIMEOUT`` has passed (logged as a warning).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import kopf

from strata.operator import conditions, events, topic_sync
from strata.operator.broker import ClusterFactory, connect, default_cluster
from strata.operator.kafka import Cluster, KafkaOperationError
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerNames, BrokerSpec, SpecError, TopicSpec
from strata.operator.settings import SETTINGS
from strata.operator.throttle import TOPIC_CONFIGS, ThrottlePlan, plan_throttles
from strata.operator.topic_sync import ObservedTopic

logger = logging.getLogger(__name__)

# The Ready reason last posted as an Event per Topic: a timer pass may still hold the body from
# before the change handler's status patch, and must not post the same Event again.
_posted: dict[tuple[str, str, str], str] = {}

# Kafka errors that retrying cannot fix: reported as the Topic's condition, not retried.
REFUSED: Final = {"INVALID_REPLICATION_FACTOR": conditions.INVALID_REPLICATION_FACTOR,
                  "INVALID_TOPIC_EXCEPTION": conditions.INVALID_SPEC,
                  "POLICY_VIOLATION": conditions.INVALID_SPEC}


def _owner(body: Mapping[str, Any], kube: Kube) -> tuple[topic_sync.TopicRef | None,
                                                          topic_sync.TopicRef | None]:
    me = topic_sync.topic_ref(body)
    if me is None:
        return None, None
    others = [ref for item in kube.list("Topic", me.namespace)
              if (ref := topic_sync.topic_ref(item)) is not None and ref.name != me.name]
    return me, topic_sync.owner_of(me, others)


def _broker(kube: Kube, namespace: str, name: str) -> Obj | None:
    broker = kube.read("Broker", namespace, name)
    if broker is None or (broker.get("metadata") or {}).get("deletionTimestamp"):
        return None
    return broker


def _cluster(kube: Kube, names: BrokerNames, broker: Obj, cluster_factory: ClusterFactory
             ) -> Cluster:
    """The Kafka cluster of ``broker`` (a Broker whose spec does not parse: its defaults)."""
    try:
        broker_spec = BrokerSpec.parse(broker.get("spec") or {}, names.name)
    except SpecError:
        broker_spec = BrokerSpec()
    return connect(kube, names, broker_spec, cluster_factory)


def reconcile(body: Mapping[str, Any], kube: Kube,
              cluster_factory: ClusterFactory = default_cluster) -> Obj:
    metadata = body["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    write = events.ready_status_writer(kube, "Topic", body, _posted)

    try:
        spec = TopicSpec.parse(body.get("spec") or {}, name)
    except SpecError as exc:
        return write(False, conditions.INVALID_SPEC, str(exc))
    me, owner = _owner(body, kube)
    if me is not None and owner is not None and owner != me:
        return write(False, conditions.RESOURCE_CONFLICT,
                     f"topic {spec.topic_name!r} is managed by Topic "
                     f"{owner.namespace}/{owner.name} (the older one)",
                     topicName=spec.topic_name)
    broker = _broker(kube, namespace, spec.broker)
    if broker is None:
        return write(False, conditions.BROKER_NOT_FOUND,
                     f"Broker {namespace}/{spec.broker} does not exist",
                     topicName=spec.topic_name)
    cluster = _cluster(kube, BrokerNames(spec.broker, namespace), broker, cluster_factory)
    try:
        observed = cluster.describe_topic(spec.topic_name)
        changes = topic_sync.decide(spec.partitions, spec.config, observed, spec.replicas)
        if changes.create:
            cluster.create_topic(spec.topic_name, spec.partitions, spec.replicas, spec.config)
            logger.info("created topic %r", spec.topic_name)
        if changes.partitions:
            cluster.create_partitions(spec.topic_name, changes.partitions)
            logger.info("topic %r: partitions -> %d", spec.topic_name, changes.partitions)
        if changes.set_config or changes.delete_config:
            cluster.alter_config(spec.topic_name, changes.set_config, changes.delete_config)
            logger.info("topic %r: config set %s, deleted %s", spec.topic_name,
                        dict(changes.set_config), list(changes.delete_config))
        served = True
        if changes.reassign:
            targets = {(spec.topic_name, p): ids for p, ids in changes.reassign.items()}
            _throttle(cluster, spec.topic_name, observed, targets)
            served = cluster.reassign(targets)
        elif _throttled(observed, spec.config) and not cluster.ongoing_reassignments():
            assert observed is not None
            cluster.clear_throttle(ThrottlePlan({spec.topic_name: {}}, observed.brokers))
            logger.info("topic %r: replication throttles removed", spec.topic_name)
            logger.info("topic %r: reassigning %d partitions to replication factor %s",
                        spec.topic_name, len(changes.reassign), spec.replicas)
        after = cluster.describe_topic(spec.topic_name) if not changes.empty else observed
    except KafkaOperationError as exc:
        if exc.code in REFUSED:
            return write(False, REFUSED[exc.code], str(exc), topicName=spec.topic_name)
        write(False, conditions.KAFKA_ERROR, str(exc), topicName=spec.topic_name)
        raise kopf.TemporaryError(str(exc), delay=SETTINGS.reconcile_interval) from None
    observed_now: Obj = {"topicName": spec.topic_name}
    observed_now["partitions"] = after.partitions if after is not None else spec.partitions
    factor = after.replication_factor if after is not None else None
    if factor is not None:
        observed_now["replicas"] = factor
    if changes.problem:
        return write(False, conditions.PARTITIONS_DRIFT, changes.problem, **observed_now)
    if changes.replicas_problem:
        return write(False, conditions.INVALID_REPLICATION_FACTOR, changes.replicas_problem,
                     **observed_now)
    if changes.reassign:
        if not served:
            return write(False, conditions.REASSIGNMENT_NOT_SERVED,
                         f"replicas {spec.replicas}: the controller does not serve "
                         "AlterPartitionReassignments", **observed_now)
        total = observed.partitions if observed is not None else len(changes.reassign)
        return write(False, conditions.REASSIGNMENT_IN_PROGRESS,
                     f"replication factor -> {spec.replicas}: "
                     f"{total - len(changes.reassign)} of {total} partitions done, "
                     f"{len(changes.reassign)} being reassigned", **observed_now)
    return write(True, conditions.TOPIC_READY,
                 f"topic {spec.topic_name!r} has {observed_now['partitions']} partitions"
                 + (f" of {factor} replicas" if factor is not None else ""), **observed_now)


def _throttled(observed: ObservedTopic | None, spec_config: Mapping[str, str]) -> bool:
    """Whether the topic carries throttled-replicas configs the spec does not set (the
    operator's, from a ``replicas`` change)."""
    return observed is not None and any(
        observed.dynamic_config.get(key) and key not in spec_config for key in TOPIC_CONFIGS)


def _throttle(cluster: Cluster, topic: str, observed: ObservedTopic | None,
              targets: Mapping[tuple[str, int], tuple[int, ...]]) -> None:
    """Throttle a ``replicas`` change (``throttle.py``) at its first pass: later passes see
    the union of old and new replicas, which would plan no follower throttle. Removed once no
    reassignment is in progress (Kafka's ``--verify``: topic configs and every broker's
    rates)."""
    if observed is None or SETTINGS.rebalance_throttle <= 0 or _throttled(observed, {}):
        return
    current = {(topic, p): ids for p, ids in observed.assignment.items()}
    plan = plan_throttles(current, targets, SETTINGS.rebalance_throttle)
    if not plan.empty:
        cluster.set_throttle(ThrottlePlan(plan.topics, observed.brokers, plan.rate))


def delete(body: Mapping[str, Any], kube: Kube, runtime_seconds: float,
           cluster_factory: ClusterFactory = default_cluster,
           timeout: Callable[[], float] = lambda: SETTINGS.topic_delete_timeout) -> str:
    """Delete the topic in Kafka if this Topic owns it; returns what was done (for logs).

    Raises ``kopf.TemporaryError`` to retry while the cluster is unreachable, until
    ``timeout()`` seconds after the first attempt; then gives up and lets the finalizer go.
    """
    metadata = body["metadata"]
    namespace = metadata["namespace"]
    _posted.pop((namespace, metadata["name"], str(metadata.get("uid", ""))), None)
    try:
        spec = TopicSpec.parse(body.get("spec") or {}, metadata["name"])
    except SpecError:
        return "released: invalid spec, nothing was created"
    me, owner = _owner(body, kube)
    if me is not None and owner is not None and owner != me:
        return f"released: topic {spec.topic_name!r} belongs to Topic {owner.name}"
    broker = _broker(kube, namespace, spec.broker)
    if broker is None:
        return f"released: Broker {spec.broker} is gone"
    cluster = _cluster(kube, BrokerNames(spec.broker, namespace), broker, cluster_factory)
    try:
        cluster.delete_topic(spec.topic_name)
    except KafkaOperationError as exc:
        if runtime_seconds >= timeout():
            logger.warning("giving up deleting topic %r after %.0fs: %s", spec.topic_name,
                           runtime_seconds, exc)
            return f"released: gave up deleting {spec.topic_name!r}: {exc}"
        raise kopf.TemporaryError(str(exc), delay=min(10.0, SETTINGS.reconcile_interval)) \
            from None
    return f"deleted topic {spec.topic_name!r}"
