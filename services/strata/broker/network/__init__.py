"""The network: listeners, connections, TLS and SASL sessions, response writing, and
broker-to-broker connections."""
