"""How everything else reaches brokers: Strata's Kafka clients, in one place.

The admin service, the CLI, the operator, Spark and the brokers' own followers reach a broker
only through this package (and ``strata.protocol``'s codec), never through broker internals:

* ``broker_client`` — ``BrokerClient``: one Kafka protocol connection (ApiVersions, then one
  request at a time), with TLS and SASL login;
* ``bootstrap_request`` — one request to the first bootstrap broker that answers (the APIs
  librdkafka has no call for: reassignments, client quotas);
* ``security`` — ``ClientSecurity``, the login a connection uses;
* ``sasl_client`` — the client side of SaslHandshake/SaslAuthenticate (PLAIN, SCRAM);
* ``client_properties`` — ``ClientSecurity`` from librdkafka-style properties;
* ``kafka_config`` — the librdkafka properties every confluent-kafka client starts from;
* ``kafka_admin`` — ``KafkaAdmin``, the one confluent-kafka admin client of the CLI, the admin
  service and the operator;
* ``kafka_errors`` — Kafka's error names for confluent-kafka's errors, and ``KafkaClientError``,
  the one failure a confluent-kafka call raises;
* ``fetch_codec`` — Fetch v11 by hand: the follower's request, the one FetchResponse reader;
* ``group_offsets`` — consumer-group offset arithmetic (lag, reset targets).
* ``transactions`` — ListTransactions, DescribeTransactions, DescribeProducers and the
  administrative WriteTxnMarkers ABORT, each sent where Kafka's admin client sends it.

Dependencies: ``strata.protocol``, ``strata.security`` and ``strata.storage`` only
(tests/unit/test_dependencies.py).
"""
