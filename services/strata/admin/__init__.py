"""``strata.admin``: the REST admin service (``strata admin``, port 8080, docs/admin-api.md).

A FastAPI application served by uvicorn that talks to brokers only over the Kafka protocol
(confluent-kafka's AdminClient, Producer and Consumer), never through broker internals:

* ``app``: builds the application (routers, problem+json errors, health, its own metrics);
* ``kafka_gateway``: the one place that calls the clients, each blocking call on a worker thread;
* ``problems``: RFC 9457 ``application/problem+json`` errors and Kafka error name → HTTP status;
* ``models``: every request and response body (pydantic);
* ``routers/``: one module per resource (cluster, brokers, topics, records, groups, health);
* ``metrics``: the service's own Prometheus registry;
* ``server``: ``run()``, uvicorn on a host and port.
"""
