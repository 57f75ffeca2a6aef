"""Client quotas (Kafka's ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``): their configuration per user and client id, the rates measured
against them, and the throttle times that follow (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599).

Modules: ``client_quotas`` (the pure configuration model: entities, validation, Describe
filters, Kafka's resolution order), ``sampled_rate`` (Kafka's windowed rate), and
``client_quota_manager`` (measurement and throttle time per quota key).
"""
