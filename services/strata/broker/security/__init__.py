"""Broker security: listeners' security protocols, TLS, SASL (PLAIN, SCRAM), principals.

One module per concept:

* ``listeners`` — ``listener.security.protocol.map``, per-listener settings, advertised endpoints,
  the inter-broker listener and the credentials brokers log in to each other with;
* ``tls`` — ``ssl.SSLContext`` s from Kafka's PEM ``ssl.*`` settings;
* ``principal`` — Kafka principals (``User:alice``, ``User:CN=...``, ``User:ANONYMOUS``);
* ``scram`` — RFC 5802/7677 math, credentials and both sides of an exchange;
* ``credentials`` — where salted credentials live (metadata store, or a file for one broker);
* ``session`` — one connection's SASL state machine and principal;
* ``sasl_client`` — the follower's login to a leader;
* ``client_properties`` — a Kafka client's ``ClientSecurity`` from librdkafka-style properties
  (the CLI's ``--command-config``, the operator's client settings);
* ``acl`` — Kafka's ACL vocabulary, filters and the pure authorization rule.

The principal of every request is ``RequestContext.principal``: what ACLs check.
"""
