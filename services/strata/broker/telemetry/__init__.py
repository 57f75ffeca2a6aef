"""Client metrics (KIP-714): subscriptions, client instances, pushed OTLP metrics on /metrics.

The room of Kafka's ``ClientMetricsManager`` and its helpers, one concept per module:

* ``client_metrics_config`` (pure): the ``client-metrics`` config resource (``metrics``,
  ``interval.ms``, ``match``), Kafka's validation, the match selectors, the storage scope;
* ``client_metrics_resource``: that resource in DescribeConfigs / (Incremental)AlterConfigs;
* ``client_instance`` (pure): one client instance's state (subscription id, push interval,
  request timestamps, terminating, last error);
* ``client_metrics_manager`` (pure, time injected): the GetTelemetrySubscriptions /
  PushTelemetry decisions and the bounded instance cache;
* ``otlp`` (pure): OTLP ``MetricsData`` protobuf bytes to samples with Prometheus names;
* ``client_metrics_collector``: the latest samples of each pushing client on the broker's
  ``/metrics``, expired when the client stops pushing, bounded.

Handlers (``handlers/get_telemetry_subscriptions.py``, ``handlers/push_telemetry.py``) call the
manager held by ``BrokerState.client_metrics``; the config handlers store subscriptions as the
dynamic configs of a ``client-metrics`` resource (``client_metrics_config.scope_of``).
"""
