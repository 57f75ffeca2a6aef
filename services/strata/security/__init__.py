"""Security shared by brokers and clients: principals, ACLs, SCRAM, stored credentials, SASL names.

One module per concept, none doing network I/O (the broker's side of a connection lives in
``strata.broker.network``, the client's login in ``strata.client``):

* ``principal`` — Kafka principals (``User:alice``, ``User:CN=...``, ``User:ANONYMOUS``);
* ``acl`` — Kafka's ACL vocabulary, filters and the pure authorization rule (the brokers', the
  admin service's and the CLI's, so all three decide alike);
* ``acl_store`` — where ACL bindings live (metadata store, or a file for one broker);
* ``scram`` — RFC 5802/7677 math, credentials and both sides of an exchange;
* ``credentials`` — where salted SCRAM credentials live (metadata store, or a file);
* ``sasl`` — security protocol and SASL mechanism names, the ``sasl.jaas.config`` option syntax.

Dependencies: ``strata.metadata`` and ``strata.storage`` only; the broker and the clients import
this package, never the other way round (tests/unit/test_dependencies.py).
"""
