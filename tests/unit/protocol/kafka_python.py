"""Bridges to kafka-python 3's protocol classes: an encoder and decoder we did not write.

kafka-python builds its message classes from its own copy of Kafka's JSON specs, so bytes it
encodes (and its decoding of our bytes) check our codec against an independent implementation.
Importing it emits a ``DeprecationWarning`` (``importlib.resources.read_text``) that the suite's
``filterwarnings = error`` would turn into a collection error, so the import is wrapped here.

Known differences from Kafka's names that kafka-python patches in on purpose, undone by
``kafka_python_plain``: MetadataResponse (v8+) calls both ``ClusterAuthorizedOperations`` and
``TopicAuthorizedOperations`` ``authorized_operations``, and the authorized-operations fields of
MetadataResponse and DescribeGroupsResponse decode as sets of bit numbers (None for the
"not requested" value -2147483648) instead of int32.
"""

from __future__ import annotations

import warnings
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol.admin
    import kafka.protocol.consumer
    import kafka.protocol.metadata
    import kafka.protocol.producer
    import kafka.protocol.sasl  # noqa: F401  (registers the SASL message classes)
    from kafka.protocol.api_message import ApiMessage

NOT_REQUESTED_OPERATIONS = -2147483648


def _all_message_classes() -> dict[tuple[int, str], Any]:
    found: dict[tuple[int, str], Any] = {}
    pending = list(ApiMessage.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            found[(cls.API_KEY, cls.type)] = cls
    return found


CLASSES = _all_message_classes()


def request_class(api_key: int) -> Any:
    return CLASSES[(int(api_key), "request")]


def response_class(api_key: int) -> Any:
    return CLASSES[(int(api_key), "response")]


def to_kafka_python(cls: Any, version: int, description: dict[str, Any]) -> Any:
    """A kafka-python message of ``version`` holding ``description`` (a sample)."""
    return cls[version](**_fields(cls, description))


def _fields(container: Any, description: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in description.items():
        field = container.fields[name]
        if field.is_struct_array() and value is not None:
            out[name] = [field.data_class(**_fields(field.data_class, item)) for item in value]
        elif field.is_struct() and value is not None:
            out[name] = field.data_class(**_fields(field.data_class, value))
        else:
            out[name] = value
    return out


def kafka_python_plain(message: Any) -> Any:
    """A decoded kafka-python message in the sample representation (Kafka's names, int32s)."""
    plain = _plain(message.to_dict(json=False))
    if message.API_KEY == 3 and message.type == "response" and message.version >= 8:
        if message.version <= 10:  # Metadata v11 dropped the cluster's
            plain["cluster_authorized_operations"] = plain.pop("authorized_operations")
        for topic in plain["topics"]:
            topic["topic_authorized_operations"] = topic.pop("authorized_operations")
    if message.API_KEY == 60 and message.type == "response":  # DescribeCluster: same rename
        plain["cluster_authorized_operations"] = plain.pop("authorized_operations")
    return plain


def _plain(value: Any, name: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _plain(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if name == "authorized_operations":
        if value is None:
            return NOT_REQUESTED_OPERATIONS
        bits = sum(1 << bit for bit in value)
        return bits - (1 << 32) if bits >= 1 << 31 else bits
    return value
