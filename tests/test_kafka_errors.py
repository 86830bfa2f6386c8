"""aioproducer.kafka_errors against Kafka's own error table (shared/kafka-protocol/errors.json)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from aioproducer import errors, kafka_errors
from aioproducer.errors import KafkaError, ProtocolError
from aioproducer.kafka_errors import ERROR_CLASSES, kafka_error


def _shared() -> Path:
    """`shared/` beside the checkout (its parent for a worktree nested one level deeper)."""
    for parent in Path(__file__).resolve().parents[1:4]:
        if (parent / "shared" / "kafka-protocol").is_dir():
            return parent / "shared"
    return Path(__file__).resolve().parents[2] / "shared"


ERRORS_JSON = _shared() / "kafka-protocol" / "errors.json"
# Codes Kafka added after the errors.json snapshot, as listed in shared/kafka-protocol/README.md and read from
# Errors.java at the 4.1.1 tag: (name, retriable, message).
KAFKA_4_1_CODES = {
    129: (
        "REBOOTSTRAP_REQUIRED",
        False,
        "Client metadata is stale. The client should rebootstrap to obtain new metadata.",
    ),
    130: ("STREAMS_INVALID_TOPOLOGY", False, "The supplied topology is invalid."),
    131: ("STREAMS_INVALID_TOPOLOGY_EPOCH", False, "The supplied topology epoch is invalid."),
    132: ("STREAMS_TOPOLOGY_FENCED", False, "The supplied topology epoch is outdated."),
    133: ("SHARE_SESSION_LIMIT_REACHED", True, "The limit of share sessions has been reached."),
}

# Codes whose Java exception extends InvalidMetadataException, read from apache/kafka's
# clients/src/main/java/org/apache/kafka/common/errors/*.java. UNKNOWN_LEADER_EPOCH (75) is absent on purpose:
# UnknownLeaderEpochException extends RetriableException ("Clients need not refresh metadata before retrying").
INVALID_METADATA_CODES = {3, 5, 6, 9, 13, 56, 72, 74, 80, 83, 84, 100, 103}


def _table() -> list[dict[str, Any]]:
    if not ERRORS_JSON.is_file():
        pytest.fail(f"Kafka's error table is missing: expected {ERRORS_JSON} (clone shared/ beside the repo)")
    entries: list[dict[str, Any]] = json.loads(ERRORS_JSON.read_text())["errors"]
    newer = [
        {"code": code, "name": name, "retriable": retriable, "message": message}
        for code, (name, retriable, message) in KAFKA_4_1_CODES.items()
    ]
    return entries + newer


def _expected_name(kafka_name: str) -> str:
    camel = "".join(part.capitalize() for part in kafka_name.split("_"))
    name = camel if camel.endswith("Error") else f"{camel}Error"
    # Where aioproducer.errors has that name for a broader family (not a KafkaError), the code's class is Broker...
    family = getattr(errors, name, None)
    return f"Broker{name}" if family is not None and not issubclass(family, KafkaError) else name


def test_one_class_per_code_except_none() -> None:
    codes = {entry["code"] for entry in _table()}
    assert len(codes) == 130 + len(KAFKA_4_1_CODES)
    assert set(ERROR_CLASSES) == codes - {0}


@pytest.mark.parametrize("entry", [e for e in _table() if e["code"] != 0], ids=lambda e: e["name"])
def test_class_matches_kafka_table(entry: dict[str, Any]) -> None:
    cls = ERROR_CLASSES[entry["code"]]
    name = _expected_name(entry["name"])
    assert cls.__name__ == name
    assert getattr(kafka_errors, name) is cls
    assert issubclass(cls, KafkaError)
    assert cls.code == entry["code"]
    assert cls.retriable is entry["retriable"]
    assert cls.invalid_metadata is (entry["code"] in INVALID_METADATA_CODES)
    assert cls.default_message == entry["message"]
    assert str(cls()) == entry["message"]


def test_names_follow_the_regular_pattern() -> None:
    assert kafka_errors.UnknownServerError.code == -1
    assert kafka_errors.NotLeaderOrFollowerError.code == 6
    assert kafka_errors.KafkaStorageError.code == 56
    assert kafka_errors.InvalidTopicExceptionError.code == 17


def test_retriable_count_matches_the_table() -> None:
    assert sum(cls.retriable for cls in ERROR_CLASSES.values()) == 32


def test_invalid_metadata_errors_are_all_retriable() -> None:
    # InvalidMetadataException extends RetriableException in Java, so one implies the other.
    assert all(cls.retriable for cls in ERROR_CLASSES.values() if cls.invalid_metadata)


def test_all_lists_every_class() -> None:
    names = {cls.__name__ for cls in ERROR_CLASSES.values()}
    assert set(kafka_errors.__all__) == names | {"ERROR_CLASSES", "kafka_error"}


def test_kafka_error_uses_given_message_or_default() -> None:
    error = kafka_error(6, "t-0 moved")
    assert isinstance(error, kafka_errors.NotLeaderOrFollowerError)
    assert str(error) == "t-0 moved"
    assert str(kafka_error(3)) == kafka_errors.UnknownTopicOrPartitionError.default_message


def test_unknown_code_becomes_unknown_server_error_carrying_the_code() -> None:
    error = kafka_error(4242, "from a newer broker")
    assert isinstance(error, kafka_errors.UnknownServerError)
    assert error.code == 4242
    assert "4242" in str(error) and "from a newer broker" in str(error)
    assert not error.retriable
    assert kafka_errors.UnknownServerError.code == -1  # the class is untouched


def test_code_zero_is_not_an_error() -> None:
    with pytest.raises(ProtocolError, match="NONE"):
        kafka_error(0)


@pytest.mark.parametrize(
    ("code", "family"),
    [
        (10, errors.RecordTooLargeError),
        (35, errors.UnsupportedVersionError),
        (58, errors.AuthenticationError),
        (87, errors.InvalidRecordError),
        (90, errors.ProducerFencedError),
    ],
)
def test_codes_with_an_aioproducer_meaning_are_caught_by_that_family(code: int, family: type[Exception]) -> None:
    with pytest.raises(family):
        raise kafka_error(code)
    with pytest.raises(KafkaError):
        raise kafka_error(code)


def test_errors_pickle_with_their_message() -> None:
    error = kafka_error(19, "not enough")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is kafka_errors.NotEnoughReplicasError and str(copy) == "not enough"
