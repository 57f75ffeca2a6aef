"""``GroupConversion``: online migration at run time — a coordinator's live groups converted.

The runtime around the pure ``consumer_group_migration`` (Kafka's ``convertToConsumerGroup`` /
``convertToClassicGroup`` in ``GroupMetadataManager``), between the classic coordinator
(``coordinator.GroupCoordinator``) and its consumer groups
(``consumer_group_coordinator.ConsumerGroupCoordinator``). Owns:

* ``upgrade``: whether a classic group with members may become a consumer group
  (``group.consumer.migration.policy`` allows upgrades, the group speaks the ``consumer``
  embedded protocol, fits ``group.consumer.max.size``, its members' protocol bytes parse);
  then parked JoinGroup / SyncGroup requests are answered REBALANCE_IN_PROGRESS, the classic
  group is replaced by an empty offsets holder (its committed offsets kept), every member's
  session starts now, and the classic group's metadata tombstone is queued to go first in the
  consumer group's next batch of records;
* ``maybe_downgrade``: after a member of the consumer protocol left or was fenced, if only
  classic members remain and the policy allows downgrades (and ``group.max.size``), one batch
  deletes the consumer group's records and writes the classic group's metadata record; the
  classic group (generation = the group epoch before the leave) takes the offsets and starts a
  rebalance. If the batch cannot be appended, nothing changes. Static members keep their
  ``group.instance.id`` and, as their classic assignment, their target: a static member that
  rejoins the classic group under a new member id takes over its place (KIP-345);
* ``maybe_downgrade`` with ``rebalance=False``: a classic JoinGroup with a
  ``group.instance.id`` replaced the last member of the consumer protocol (the same
  application restarted on the classic protocol): the group is downgraded at once, at the
  current group epoch, the joining member holding the replaced member's target, and no
  rebalance starts (Kafka's ``validateOnlineDowngradeWithReplacedMemberId``).

Event-loop only; no locks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strata.broker.group.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from strata.broker.group.consumer_group import ConsumerGroup, IllegalGroupStateError
from strata.broker.group.consumer_group_migration import from_classic_group, to_classic_group
from strata.broker.group.consumer_protocol import ConsumerProtocolError
from strata.broker.group.member import JoinGroupResult, SyncGroupResult
from strata.broker.group.metadata_codec import group_metadata_key
from strata.broker.group.metadata_manager import append_error, group_metadata_record
from strata.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from strata.broker.group.consumer_group_coordinator import ConsumerGroupCoordinator
    from strata.broker.group.coordinator import GroupCoordinator

logger = logging.getLogger(__name__)


class GroupConversion:
    """See the module docstring."""

    def __init__(self, coordinator: GroupCoordinator,
                 consumer_groups: ConsumerGroupCoordinator) -> None:
        self._coordinator = coordinator
        self._consumer_groups = consumer_groups

    def upgrade(self, classic: ClassicGroup) -> ConsumerGroup | None:
        """The consumer group a live classic group becomes (None: it cannot be upgraded)."""
        config = self._consumer_groups.membership.config
        group_id = classic.group_id
        if not config.migration_policy.upgrade_enabled:
            reason = "the online upgrade is disabled"
        elif classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            reason = "the group does not use the consumer embedded protocol"
        elif classic.size > config.max_size:
            reason = "the group size exceeds the consumer group maximum size"
        else:
            try:
                group = from_classic_group(classic, self._consumer_groups.topics())
            except (ConsumerProtocolError, IllegalGroupStateError, KeyError) as exc:
                reason = f"its embedded consumer protocol is malformed ({exc})"
            else:
                self._replace_classic(classic, group)
                logger.info("upgraded classic group %s (generation %d, %d members) to a "
                            "consumer group", group_id, classic.generation_id, classic.size)
                return group
        logger.info("cannot upgrade classic group %s to consumer group because %s",
                    group_id, reason)
        return None

    def _replace_classic(self, classic: ClassicGroup, group: ConsumerGroup) -> None:
        for member in list(classic.members.values()):
            classic.maybe_invoke_join_callback(
                member, JoinGroupResult(ErrorCode.rebalance_in_progress, member.member_id))
            classic.maybe_invoke_sync_callback(
                member, SyncGroupResult(ErrorCode.rebalance_in_progress))
        holder = ClassicGroup(classic.group_id, self._coordinator.clock)
        holder.offsets = classic.offsets
        holder.protocol_type = CONSUMER_PROTOCOL_TYPE
        self._coordinator.put_group(holder)
        now = self._coordinator.clock.monotonic_ms()
        for member_id, converted in group.members.items():
            timeout = converted.classic.session_timeout_ms if converted.classic else 0
            group.session_deadlines[member_id] = now + timeout
        self._consumer_groups.adopt(group, [(group_metadata_key(classic.group_id), None)])

    def maybe_downgrade(self, group: ConsumerGroup, generation: int, *,
                        rebalance: bool = True) -> ClassicGroup | None:
        """After a member of the consumer protocol left, was fenced or was replaced: if only
        classic members remain and the policy allows, the classic group ``group`` became, at
        ``generation`` (None: it stays a consumer group)."""
        config = self._consumer_groups.membership.config
        if not group.members or any(not m.uses_classic_protocol for m in group.members.values()) \
                or not config.migration_policy.downgrade_enabled \
                or len(group.members) > config.classic_max_size:
            return None
        coordinator = self._coordinator
        names = {t.topic_id: t.name for t in self._consumer_groups.topics().values()}
        classic, assignments = to_classic_group(group, coordinator.clock, names)
        classic.generation_id = generation
        group_id = group.group_id
        written = self._consumer_groups.deletion_records(group_id)
        written.append((group_metadata_key(group_id), group_metadata_record(classic, assignments)))
        error = append_error(coordinator.manager.append(coordinator.partition_for(group_id),
                                                        written), offsets=False)
        if error != ErrorCode.none:
            logger.warning("cannot downgrade consumer group %s: %s", group_id, error.name)
            return None
        self._consumer_groups.forget(group_id)
        logger.info("downgraded consumer group %s to a classic group (generation %d, %d "
                    "members)", group_id, classic.generation_id, classic.size)
        holder = coordinator.group(group_id)
        if holder is not None:
            classic.offsets = holder.offsets
        coordinator.put_group(classic)
        coordinator.membership.on_group_loaded(classic)
        if rebalance:
            coordinator.membership.prepare_rebalance(
                classic, f"Downgrade group {group_id} from consumer to classic.")
        coordinator._after(classic)
        return classic
