"""``/console/brokers/{id}``: one broker — its traffic charts, log dirs and dynamic configs.

* ``GET /console/brokers/{id}``: the broker (host, port, rack, whether it is the
  controller), its latest sampled rates and the charts of its own series (bytes in and out,
  requests per second, the partitions it leads that are under-replicated: Kafka's
  ``UnderReplicatedPartitions`` of that broker) and of its log dirs' disk use, sampled by the
  console's ``MetricsSampler``; its configs (DescribeConfigs on the BROKER resource, as
  ``GET /v1/brokers/{id}``), the dynamic ones (set on this broker or as the cluster-wide
  default) first, each with its source, read-only flag and a *Reset* for a dynamic value;
* ``POST /console/brokers/{id}/configs``: IncrementalAlterConfigs on the BROKER resource —
  ``set_name`` = ``set_value`` or ``delete`` one dynamic value, ``scope`` ``broker`` (this
  node's id) or ``default`` (the resource named ``""``: every broker's default), as
  ``kafka-configs.sh --entity-type brokers [--entity-default] --alter``. The broker decides
  what may change: a read-only (static) config or a bad value is refused with Kafka's error
  (INVALID_CONFIG, INVALID_REQUEST...), shown above the form with its message.

Authorization, Kafka's for these APIs: the page needs Cluster Describe, its configs Cluster
DescribeConfigs (a broker's configs are checked on the Cluster; without it they are not
shown), a change Cluster AlterConfigs (the forms are shown only with it; a POST without it is
403).
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Path
from fastapi.responses import Response

from strata.admin.console.charts import sampler_of
from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute
from strata.admin.models import BrokerDescription, ConfigValue
from strata.admin.problems import ProblemError
from strata.admin.routers.brokers import config_values
from strata.admin.routers.cluster import describe_cluster
from strata.client.broker_configs import alter_broker_config
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

BrokerId = Annotated[int, Path(ge=0, le=2**31 - 1)]
DYNAMIC_SOURCES: Final = ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG")
RATES: Final = ("bytes_in", "bytes_out", "records_in", "requests", "under_replicated")
MAX_CONFIG_NAME: Final = 255


def ordered_configs(configs: dict[str, ConfigValue]) -> list[tuple[str, ConfigValue]]:
    """The configs to show: dynamic values first, then the writable ones, then the rest,
    each group by name."""
    def rank(item: tuple[str, ConfigValue]) -> tuple[int, str]:
        name, value = item
        if value.source in DYNAMIC_SOURCES:
            return 0, name
        return (2 if value.read_only else 1), name
    return sorted(configs.items(), key=rank)


async def render_broker(console: ConsoleDep, broker_id: int, error: ProblemError | None = None,
                        notice: str = "") -> Response:
    access, gateway = console.access, console.gateway
    await access.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    may_describe_configs = await access.allowed(AclOperation.DESCRIBE_CONFIGS,
                                                ResourceType.CLUSTER)
    sampler = sampler_of(console)
    cluster = await gateway.run(describe_cluster, gateway)
    found = {b.id: b for b in cluster.brokers}.get(broker_id)
    if found is None:  # before DescribeConfigs, which would wait for it until its timeout
        raise ProblemError.kafka("BROKER_NOT_FOUND", f"no live broker has id {broker_id}")
    entries = (await gateway.run(gateway.kafka.broker_configs, broker_id)
               if may_describe_configs else {})
    broker = BrokerDescription(**found.model_dump(), configs=config_values(entries))
    latest = sampler.latest_log_dirs
    dirs = sorted((d for d in latest.dirs if d.broker == broker_id),
                  key=lambda d: d.path) if latest else []
    store = sampler.store
    configs = ordered_configs(broker.configs)
    return console.render(
        "broker.html", status=error.status if error is not None else 200, broker=broker,
        controller=cluster.controller == broker_id,
        rates={name: store.latest(f"broker:{broker_id}:{name}") for name in RATES},
        log_dirs=dirs, disk_keys=[f"logdir:{d.broker}:{d.path}:used" for d in dirs],
        disk_labels=[d.path for d in dirs], configs=configs,
        writable=[name for name, value in configs if not value.read_only],
        may_describe_configs=may_describe_configs,
        may_alter_configs=await access.allowed(AclOperation.ALTER_CONFIGS,
                                               ResourceType.CLUSTER),
        error=error, notice=notice, section="overview")


@router.get("/brokers/{broker_id}")
async def broker_page(console: ConsoleDep, broker_id: BrokerId) -> Response:
    return await render_broker(console, broker_id)


@router.post("/brokers/{broker_id}/configs")
async def alter_configs(console: ConsoleDep, broker_id: BrokerId) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
    key, value = fields.get("set_name", "").strip(), fields.get("set_value", "").strip()
    removed = fields.get("delete", "").strip()
    scope = fields.get("scope", "broker")
    try:
        if scope not in ("broker", "default"):
            raise ProblemError(422, "VALIDATION_ERROR", "scope: broker or default")
        if bool(key) == bool(removed) or len(key or removed) > MAX_CONFIG_NAME:
            raise ProblemError(422, "VALIDATION_ERROR",
                               "give one config to set (set_name) or to reset (delete)")
        address = None
        if scope == "broker":
            cluster = await console.gateway.run(describe_cluster, console.gateway)
            found = {b.id: b for b in cluster.brokers}.get(broker_id)
            if found is None:
                raise ProblemError.kafka("BROKER_NOT_FOUND",
                                         f"no live broker has id {broker_id}")
            address = f"{found.host}:{found.port}"
        await console.gateway.call(alter_broker_config, address,
                                   str(broker_id) if scope == "broker" else "",
                                   key or removed, value if key else None)
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await render_broker(console, broker_id, error=exc)
    where = f"broker {broker_id}" if scope == "broker" else "every broker (default)"
    done = (f"{key} set to {value} on {where}" if key
            else f"{removed} reset on {where}")
    return await render_broker(console, broker_id, notice=done)
