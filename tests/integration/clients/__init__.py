"""The real-client compatibility matrix: unmodified Kafka clients against a broker process.

Layout::

    model.py                   client-neutral records, deliveries, the ClientDriver interface
    drivers/                   one ClientDriver per client (confluent-kafka, kafka-python,
                               aiokafka, kafkajs via ../js/kafkajs_client.js)
    wire.py                    a blocking connection on Strata's own codec, for exact bytes
    test_matrix.py             client x feature: topics, codecs, assign-consume, ListOffsets by
                               timestamp, idempotent produce
    test_wire_idempotence.py   a duplicate batch resent byte for byte is appended once
    test_restart.py            SIGTERM / SIGKILL restarts lose nothing acknowledged
    test_garbage_frames.py     hypothesis-generated hostile bytes never stop the broker

Run: ``make node-deps`` once (kafkajs and its codecs, ``npm ci`` in ``../js``), then
``.venv/bin/pytest tests/integration/clients`` (or ``-m integration`` for every real-process
test). Each module starts its own broker (``../broker_process.py``); a failing test's report
ends with the tail of that broker's log.
"""
