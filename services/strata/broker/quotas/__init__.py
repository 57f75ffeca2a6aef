"""Client quotas (Kafka's ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``): their configuration per user and client id, the rates measured
against them, and the throttle times that follow (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599).

Modules: ``client_quotas`` (the pure configuration model: entities, validation, Describe
filters, Kafka's resolution order), ``sampled_rate`` (Kafka's windowed rate),
``client_quota_manager`` (measurement and throttle time per quota key),
``controller_mutation_quota`` (KIP-599's token bucket), ``request_time`` (a request's
event-loop time, charged to ``request_percentage``), ``request_quotas`` (what each request is
charged, what is exempt, how its throttle is answered), ``quota_store`` and ``broker_quotas``
(where the configuration lives, and one broker's enforcers).
"""
