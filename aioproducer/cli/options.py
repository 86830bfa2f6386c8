"""The options every command shares: where the cluster is and how to reach it, turned into Producer settings.

Java's names work as they are: `-X linger.ms=5`, a `--producer.config` properties file, and the usual security
flags; the result is one dict for `ProducerConfig.build`, so the producer's own validation judges it. No I/O beyond
reading the properties file.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from aioproducer.errors import ConfigError

__all__ = ["PASSWORD_ENV", "add_connection_options", "key_value_pairs", "producer_settings", "read_properties"]

PASSWORD_ENV = "AIOPRODUCER_SASL_PASSWORD"


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection (Java producer settings work as -X key=value)")
    group.add_argument(
        "-b",
        "--bootstrap-server",
        dest="bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="host:port[,host:port...] (default: $KAFKA_BOOTSTRAP_SERVERS)",
    )
    group.add_argument(
        "-X",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer setting in Java's spelling (linger.ms=5, compression.type=zstd, ...); repeatable",
    )
    group.add_argument(
        "-F",
        "--producer.config",
        dest="config_file",
        metavar="FILE",
        help="a Java .properties file of producer settings (as kafka-console-producer's --producer.config)",
    )
    group.add_argument("--security-protocol", choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
    group.add_argument("--sasl-mechanism", choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    group.add_argument("--sasl-username")
    group.add_argument(
        "--sasl-password", help=f"prefer ${PASSWORD_ENV} (read when this flag is absent): flags show in `ps`"
    )
    group.add_argument("--ssl-cafile", metavar="PEM", help="CA certificates to trust (default: the system's)")
    group.add_argument("--ssl-certfile", metavar="PEM", help="client certificate (mutual TLS)")
    group.add_argument("--ssl-keyfile", metavar="PEM", help="client key, when not inside --ssl-certfile")
    group.add_argument("--no-hostname-check", action="store_true", help="(unsafe) do not match the broker's name")


def read_properties(path: str) -> dict[str, str]:
    """A Java .properties file's `key=value` (or `key: value`) lines; `#` and `!` start comments."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the properties file {path!r}: {exc.strerror or exc}") from None
    found: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ConfigError(f"{path}:{number}: expected key=value, got {raw!r}")
        found[line[:cut].strip()] = line[cut + 1 :].strip()
    return found


def key_value_pairs(flag: str, items: list[str]) -> dict[str, str]:
    """`key=value` arguments (of -X, or perf-test's --producer-props) as a dict; ConfigError naming the flag."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} takes key=value (e.g. {flag} linger.ms=5), got {item!r}")
        found[key.strip()] = value
    return found


def producer_settings(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """One settings dict (Java keys) from the file, then -X, then the flags: later sources win."""
    settings: dict[str, Any] = {}
    if args.config_file:
        settings.update(read_properties(args.config_file))
    settings.update(key_value_pairs("-X", args.settings))
    flags = {
        "bootstrap.servers": args.bootstrap,
        "security.protocol": args.security_protocol,
        "sasl.mechanism": args.sasl_mechanism,
        "sasl_plain_username": args.sasl_username,
        "sasl_plain_password": args.sasl_password or (os.environ.get(PASSWORD_ENV) if args.sasl_username else None),
        "ssl.truststore.location": args.ssl_cafile,
        "ssl.keystore.location": args.ssl_certfile,
        "ssl_keyfile": args.ssl_keyfile,
        "ssl_check_hostname": False if args.no_hostname_check else None,
    }
    settings.update({key: value for key, value in flags.items() if value is not None})
    settings.update({key: value for key, value in extra.items() if value is not None})
    if not settings.get("bootstrap.servers") and not settings.get("bootstrap_servers"):
        raise ConfigError("no brokers given: pass -b host:port (or set KAFKA_BOOTSTRAP_SERVERS)")
    return settings
