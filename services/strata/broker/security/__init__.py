"""Broker-side authorization: the broker's ``Authorizer`` over the shared ACL rule.

Only ``authorization`` lives here (``authorizer.class.name``, super users, the ACL store the
broker reads, and the per-request decision the handlers call through ``RequestContext``). What
clients need too — principals, the ACL model and store, SCRAM, credentials, SASL names — is the
shared package ``strata.security``; listeners, TLS and the SASL session of a connection are in
``strata.broker.network``.

The principal of every request is ``RequestContext.principal``: what ACLs check.
"""
