"""aioproducer.kafka_errors against Kafka's own error table: the `Errors` enum of each Kafka release the suite runs,
read through Kafka's Java classes (`tests/kafka_reference.py`)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from kafka_reference import error_table, suite_kafka_versions

from aioproducer import errors, kafka_errors
from aioproducer.errors import KafkaError, ProtocolError
from aioproducer.kafka_errors import ERROR_CLASSES, kafka_error
from aioproducer.testing import DEFAULT_KAFKA_VERSION

RELEASES = suite_kafka_versions()


def _entries(release: str) -> list[dict[str, Any]]:
    return [entry for entry in error_table(release) if entry["code"] != 0]


def _expected_name(kafka_name: str) -> str:
    camel = "".join(part.capitalize() for part in kafka_name.split("_"))
    name = camel if camel.endswith("Error") else f"{camel}Error"
    # Where aioproducer.errors has that name for a broader family (not a KafkaError), the code's class is Broker...
    family = getattr(errors, name, None)
    return f"Broker{name}" if family is not None and not issubclass(family, KafkaError) else name


def test_one_class_per_code_of_the_newest_kafka_except_none() -> None:
    codes = {entry["code"] for entry in error_table(DEFAULT_KAFKA_VERSION)}
    assert 0 in codes and len(codes) > 130
    assert set(ERROR_CLASSES) == codes - {0}


@pytest.mark.parametrize("release", RELEASES)
def test_classes_match_each_releases_table(release: str) -> None:
    """Name, retriable and stale-metadata meaning of every code, as that release's Java has them (a code never
    changes meaning between releases, so every release the suite runs must agree), and the default message as the
    newest release words it (Kafka rewords some: 3.9's "The configured groupId is invalid.")."""
    mismatches = []
    for entry in _entries(release):
        cls = ERROR_CLASSES.get(entry["code"])
        name = _expected_name(entry["name"])
        message = entry["message"] if release == DEFAULT_KAFKA_VERSION else getattr(cls, "default_message", None)
        expected = (name, True, entry["code"], entry["retriable"], entry["invalid_metadata"], message)
        actual = None
        if cls is not None:
            actual = (
                cls.__name__,
                getattr(kafka_errors, name, None) is cls and issubclass(cls, KafkaError),
                cls.code,
                cls.retriable,
                cls.invalid_metadata,
                cls.default_message,
            )
        if actual != expected:
            mismatches.append(f"{entry['code']} {entry['name']}: ours {actual}, Kafka {release} {expected}")
    assert not mismatches, "\n".join(mismatches)


def test_the_message_is_the_str_of_an_error_without_one() -> None:
    for cls in ERROR_CLASSES.values():
        assert str(cls()) == cls.default_message


def test_names_follow_the_regular_pattern() -> None:
    assert kafka_errors.UnknownServerError.code == -1
    assert kafka_errors.NotLeaderOrFollowerError.code == 6
    assert kafka_errors.KafkaStorageError.code == 56
    assert kafka_errors.InvalidTopicExceptionError.code == 17


def test_retriable_and_stale_metadata_codes_are_kafkas() -> None:
    table = _entries(DEFAULT_KAFKA_VERSION)
    assert {cls.code for cls in ERROR_CLASSES.values() if cls.retriable} == {e["code"] for e in table if e["retriable"]}
    stale = {e["code"] for e in table if e["invalid_metadata"]}
    assert {cls.code for cls in ERROR_CLASSES.values() if cls.invalid_metadata} == stale
    # UnknownLeaderEpochException extends RetriableException only ("Clients need not refresh metadata").
    assert 75 not in stale and kafka_errors.UnknownLeaderEpochError.retriable


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
