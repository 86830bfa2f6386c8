"""`aioproducer produce TOPIC`: records from stdin (or a file), as kcat -P and kafka-console-producer read them.

Owns reading and parsing the input (plain lines with an optional key delimiter, or JSON lines) and reporting each
failed record by its line number; exit status 0 only when every record was delivered. Records are `enqueue`d, so
input streams at the producer's speed; a record the producer refuses at the call fails alone.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from collections.abc import AsyncIterator
from typing import IO, Any

from aioproducer.cli.display import Display
from aioproducer.cli.options import add_connection_options, producer_settings
from aioproducer.cli.tracker import Tracker
from aioproducer.errors import AioProducerError, ConfigError, InvalidRecordError, UnknownPartitionError
from aioproducer.models import RecordMetadata
from aioproducer.producer import Producer

__all__ = ["Line", "add_parser", "parse_json_line", "run"]

_CHUNK = 64 * 1024
_REAP_EVERY_S = 0.2


class Line:
    """One input record's fields before the producer sees them."""

    __slots__ = ("headers", "key", "number", "partition", "timestamp_ms", "value")

    def __init__(
        self,
        number: int,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        self.number, self.value, self.key = number, value, key
        self.headers, self.partition, self.timestamp_ms = headers, partition, timestamp_ms


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "produce",
        help="produce records read from stdin (lines, key-delimited lines or JSON lines)",
        description="Produce one record per input line. Exit status: 0 when every record was delivered, 1 when any "
        "failed (each failure is printed with its line number and reason), 2 for bad arguments or settings.",
    )
    parser.add_argument("topic")
    parser.add_argument("-f", "--file", help="read records from this file instead of stdin")
    parser.add_argument("-K", dest="key_delimiter", help="split each line at the first DELIM into key and value")
    parser.add_argument("-D", dest="delimiter", default="\n", help="record delimiter (default: newline)")
    parser.add_argument(
        "-J",
        "--json",
        action="store_true",
        help='each line is a JSON object: {"key", "value", "headers", "partition", "timestamp"}; str fields are '
        'sent as UTF-8, other JSON values as compact JSON, {"base64": "..."} as its bytes',
    )
    parser.add_argument(
        "-H", dest="headers", action="append", default=[], metavar="NAME=VALUE", help="add this header to every record"
    )
    parser.add_argument("-p", "--partition", type=int, help="send every record to this partition")
    parser.add_argument("-Z", dest="null_empty", action="store_true", help="send empty values as null (tombstones)")
    parser.add_argument("--print-offsets", action="store_true", help="print 'line partition offset' per delivery")
    add_connection_options(parser)
    parser.set_defaults(run=run, command_parser=parser)


async def run(args: argparse.Namespace, display: Display) -> int:
    delimiter = _unescape(args.delimiter).encode()
    key_delimiter = _unescape(args.key_delimiter).encode() if args.key_delimiter else None
    if not delimiter or key_delimiter == b"":
        display.error("delimiters must not be empty")
        return 2
    headers = [_header(item) for item in args.headers]
    refused = 0

    def report_failure(number: Any, error: BaseException) -> None:
        display.error(f"line {number}: not delivered: {type(error).__name__}: {error}")

    def report_delivery(number: Any, metadata: RecordMetadata) -> None:
        display.out(f"{number} {metadata.partition} {metadata.offset}")

    async with Producer(config=producer_settings(args)) as producer:
        partitions = await _wait_for_topic(producer, args.topic, display)
        tracker = Tracker(
            on_failure=report_failure,
            on_delivered=report_delivery if args.print_offsets else None,
            keep_labels=True,
        )
        # Deliveries are reported as they come, not only when the next line arrives (input may be interactive).
        reaper = asyncio.get_running_loop().create_task(_reap_every(tracker, _REAP_EVERY_S))
        stream = _open_input(args.file)
        try:
            async for line in _lines(stream, delimiter):
                try:
                    record = _parse(line, key_delimiter, args, headers)
                    if record.partition is not None and record.partition >= partitions:
                        partitions = len(await producer.partitions_for(args.topic))  # it may have grown
                        if record.partition >= partitions:
                            # At once: the producer would wait max_block_ms for the partition to appear.
                            raise UnknownPartitionError(
                                f"partition {record.partition} is beyond topic {args.topic!r}'s partitions "
                                f"0..{partitions - 1}"
                            )
                    delivery = await producer.enqueue(
                        args.topic,
                        record.value,
                        key=record.key,
                        headers=record.headers,
                        partition=record.partition,
                        timestamp_ms=record.timestamp_ms,
                    )
                except AioProducerError as exc:
                    refused += 1
                    report_failure(line.number, exc)
                    continue
                tracker.add(delivery, line.number)
                tracker.reap()
        finally:
            reaper.cancel()
            if args.file:
                stream.close()
        await producer.flush()
        await tracker.finish()
    failed = tracker.failed + refused
    display.info(
        f"{tracker.delivered} record{'s' if tracker.delivered != 1 else ''} delivered to {args.topic}, {failed} failed"
    )
    return 0 if failed == 0 else 1


async def _wait_for_topic(producer: Producer, topic: str, display: Display) -> int:
    """The topic's partition count, saying first that we wait when no broker has answered yet (the wait is bounded
    by max_block_ms: then MetadataTimeoutError, naming the last error)."""
    health = producer.health()
    if not health.ready:
        servers = ",".join(producer.config.bootstrap_servers)
        display.info(
            f"waiting for brokers at {servers} (up to max.block.ms={producer.config.max_block_ms}): {health.reason}"
        )
    return len(await producer.partitions_for(topic))


async def _reap_every(tracker: Tracker, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        tracker.reap()


def _open_input(path: str | None) -> IO[bytes]:
    if path is None:
        return sys.stdin.buffer
    try:
        return open(path, "rb")  # the caller closes it
    except OSError as exc:
        raise ConfigError(f"cannot read {path!r}: {exc.strerror or exc}") from None


async def _lines(stream: IO[bytes], delimiter: bytes) -> AsyncIterator[Line]:
    """Records as they arrive: chunks are read in a thread, so a slow or interactive input never blocks the loop."""
    pending = b""
    number = 0
    read = getattr(stream, "read1", stream.read)
    while True:
        chunk = await asyncio.to_thread(read, _CHUNK)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(delimiter)
        for raw in complete:
            number += 1
            yield Line(number, raw)
    if pending:
        yield Line(number + 1, pending)


def _parse(line: Line, key_delimiter: bytes | None, args: argparse.Namespace, headers: list[Any]) -> Line:
    if args.json:
        record = parse_json_line(line.number, line.value or b"")
    else:
        record = line
        if key_delimiter is not None and line.value is not None and key_delimiter in line.value:
            key, _, value = line.value.partition(key_delimiter)
            record = Line(line.number, value, key)
    if headers:
        record.headers = [*headers, *(record.headers or [])]
    if record.partition is None:
        record.partition = args.partition
    if args.null_empty and record.value == b"":
        record.value = None
    return record


def parse_json_line(number: int, raw: bytes) -> Line:
    """One JSON-lines record; raises InvalidRecordError naming the line and the problem."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidRecordError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidRecordError(f"expected a JSON object, got {type(data).__name__}")
    unknown = set(data) - {"key", "value", "headers", "partition", "timestamp"}
    if unknown:
        raise InvalidRecordError(f"unknown field(s) {sorted(unknown)}: use key, value, headers, partition, timestamp")
    headers = data.get("headers") or []
    if isinstance(headers, dict):
        headers = list(headers.items())
    if not isinstance(headers, list) or not all(isinstance(h, list | tuple) and len(h) == 2 for h in headers):
        raise InvalidRecordError('headers must be {"name": "value"} or [["name", "value"], ...]')
    for name, field in (("partition", data.get("partition")), ("timestamp", data.get("timestamp"))):
        if field is not None and (type(field) is not int or field < 0):
            raise InvalidRecordError(f"{name} must be a non-negative integer, got {field!r}")
    return Line(
        number,
        _bytes(data.get("value")),
        _bytes(data.get("key")),
        [(str(name), _bytes(value)) for name, value in headers],
        data.get("partition"),
        data.get("timestamp"),
    )


def _bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except ValueError:
            raise InvalidRecordError(f"invalid base64: {value['base64']!r}") from None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _header(item: str) -> tuple[str, bytes]:
    name, sep, value = item.partition("=")
    if not sep or not name:
        raise InvalidRecordError(f"-H takes NAME=VALUE, got {item!r}")
    return name, value.encode()


def _unescape(text: str) -> str:
    # "\t", "\n" and friends typed on a command line arrive as two characters.
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")
