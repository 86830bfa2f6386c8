"""Reading `check`'s test record back with an independent consumer (librdkafka, from confluent-kafka) when installed.

Owns the translation of the producer's connection settings into librdkafka's; blocking, so callers run it in a
thread. Returns None when confluent-kafka is missing or the settings cannot be expressed for it (OAUTHBEARER's
token provider, an `ssl_context` object).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from aioproducer.config import ProducerConfig
from aioproducer.errors import KafkaTimeoutError

__all__ = ["consumer_settings", "read_record"]

_NOT_FOUND = b""


def consumer_settings(cfg: ProducerConfig) -> dict[str, Any] | None:
    """librdkafka settings reaching the cluster as `cfg` does, or None when they cannot be expressed."""
    if cfg.sasl_mechanism == "OAUTHBEARER" or cfg.ssl_context is not None:
        return None
    conf: dict[str, Any] = {
        "bootstrap.servers": ",".join(cfg.bootstrap_servers),
        "security.protocol": cfg.security_protocol.lower(),
        "group.id": "aioproducer-check",
        "enable.auto.commit": False,
        "check.crcs": True,
    }
    if cfg.security_protocol.startswith("SASL"):
        conf.update(
            {
                "sasl.mechanism": cfg.sasl_mechanism,
                "sasl.username": cfg.sasl_plain_username,
                "sasl.password": None if cfg.sasl_plain_password is None else cfg.sasl_plain_password.reveal(),
            }
        )
    if cfg.security_protocol in ("SSL", "SASL_SSL"):
        optional = {
            "ssl.ca.location": cfg.ssl_cafile,
            "ssl.certificate.location": cfg.ssl_certfile,
            "ssl.key.location": cfg.ssl_keyfile,
            "ssl.key.password": None if cfg.ssl_password is None else cfg.ssl_password.reveal(),
        }
        conf.update({key: value for key, value in optional.items() if value is not None})
        if not cfg.ssl_check_hostname:
            conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf


def read_record(cfg: ProducerConfig, topic: str, partition: int, offset: int, timeout_s: float) -> bytes | None:
    """The value at `topic`/`partition`/`offset`, b"" when nothing arrived; None when it cannot be read here."""
    try:
        from confluent_kafka import Consumer, TopicPartition
    except ImportError:
        return None
    conf = consumer_settings(cfg)
    if conf is None or offset < 0:
        return None
    # librdkafka logs to stderr on its own; a failure here reaches the user through the check's own report.
    quiet = logging.getLogger("aioproducer.cli.read_back.librdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    consumer = Consumer(conf, logger=quiet)
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                raise KafkaTimeoutError(f"reading the test record back failed: {message.error()}")
            value: bytes = message.value() or b""
            return value
        return _NOT_FOUND
    finally:
        consumer.close()
