"""Error identity: every Kafka error code is an `ErrorCode`, each code has one class tied to it, one name means one
class across the package, and nothing but an `aioproducer.errors` class reaches a caller or a record's result."""

from __future__ import annotations

import importlib
import pkgutil
from collections import defaultdict
from typing import Any

import pytest

import aioproducer
from aioproducer import errors, kafka_errors
from aioproducer.error_codes import DEFAULT_MESSAGES, ErrorCode
from aioproducer.errors import (
    AioProducerError,
    AuthenticationError,
    KafkaError,
    TransportError,
)
from aioproducer.kafka_errors import ERROR_CLASSES, kafka_error, regular_name
from aioproducer.security.sasl import SaslCredentials

# Exceptions the library raises and catches inside itself, as signals between its parts; none reaches a caller.
INTERNAL_SIGNALS = {
    "aioproducer.columnar.cdata.CapsuleError",  # the columnar reader wraps it in InvalidTableError
    "aioproducer.transactions.coordinator.Retry",
    "aioproducer.transactions.coordinator.CoordinatorRefused",
    "aioproducer.security.oidc._Unretryable",
}


def exception_classes() -> list[type[BaseException]]:
    """Every exception class a module of the package defines (kafka_errors' generated ones included)."""
    found: dict[int, type[BaseException]] = {}
    for info in pkgutil.walk_packages(aioproducer.__path__, "aioproducer."):
        if info.name == "aioproducer.__main__":  # runs the command line when imported
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name:
                found[id(value)] = value
    return list(found.values())


def test_every_code_but_none_has_one_class_carrying_its_error_code() -> None:
    assert set(ERROR_CLASSES) == set(ErrorCode) - {ErrorCode.NONE}
    for code, cls in ERROR_CLASSES.items():
        assert type(cls.code) is ErrorCode and cls.code is ErrorCode(code), cls
        assert issubclass(cls, KafkaError)
        assert cls.default_message == DEFAULT_MESSAGES[cls.code]
        assert getattr(kafka_errors, cls.__name__) is cls
        assert cls.__name__ in (regular_name(cls.code), f"Broker{regular_name(cls.code)}")


def test_kafka_error_hands_back_the_class_of_each_code() -> None:
    for code in ErrorCode:
        if code is not ErrorCode.NONE:
            error = kafka_error(code)
            assert type(error) is ERROR_CLASSES[code] and error.code == code


def test_exception_names_are_unique_across_the_package() -> None:
    modules_by_name: dict[str, set[str]] = defaultdict(set)
    classes = exception_classes()
    for cls in classes:
        modules_by_name[cls.__name__].add(cls.__module__)
    assert len(classes) > len(ERROR_CLASSES)  # the walk saw the generated classes and the rest of the tree
    assert {name: modules for name, modules in modules_by_name.items() if len(modules) > 1} == {}


def test_every_exception_class_is_an_aioproducer_error_but_the_internal_signals() -> None:
    outsiders = {
        f"{cls.__module__}.{cls.__qualname__}" for cls in exception_classes() if not issubclass(cls, AioProducerError)
    }
    assert outsiders == INTERNAL_SIGNALS


def test_producer_fenced_is_one_class_for_the_code_and_the_transactional_verdict() -> None:
    assert kafka_errors.ProducerFencedError is errors.ProducerFencedError
    fenced = kafka_error(ErrorCode.PRODUCER_FENCED, "newer epoch")
    assert isinstance(fenced, errors.TransactionFatalError) and fenced.fatal and not fenced.retriable
    assert str(errors.ProducerFencedError()) == DEFAULT_MESSAGES[ErrorCode.PRODUCER_FENCED]


@pytest.mark.parametrize(
    ("code", "family"),
    [
        (ErrorCode.INVALID_RECORD, errors.InvalidRecordError),
        (ErrorCode.UNSUPPORTED_VERSION, errors.UnsupportedVersionError),
    ],
)
def test_a_broader_family_keeps_its_name_and_the_broker_answer_is_its_broker_subclass(
    code: ErrorCode, family: type[AioProducerError]
) -> None:
    cls = ERROR_CLASSES[code]
    assert cls.__name__ == f"Broker{family.__name__}" and issubclass(cls, family)
    # The family is raised for what no broker said (bad input at the call, no common API version): it is never a
    # KafkaError, whose retriable flag the sender, the metadata refresh and the SASL exchange act on.
    assert not issubclass(family, KafkaError)
    assert not hasattr(errors, cls.__name__)


def test_a_request_without_response_is_not_kafkas_request_timed_out() -> None:
    local = errors.ResponseTimeoutError("no response within request_timeout_ms")
    assert isinstance(local, TransportError) and not isinstance(local, KafkaError)
    assert kafka_errors.RequestTimedOutError.code is ErrorCode.REQUEST_TIMED_OUT
    assert not issubclass(kafka_errors.RequestTimedOutError, TransportError)


@pytest.mark.parametrize("when", ["awaited", "called"])
async def test_a_token_provider_that_raises_fails_authentication_with_a_typed_error(when: str) -> None:
    """Regression: an OAUTHBEARER token provider raising its own exception (a KeyError here) let that exception out
    of the SASL exchange untyped: raised from `start()`, or ending the metadata refresh task with it."""

    async def failing() -> str:
        raise KeyError("secret-in-the-message")

    def failing_at_call() -> Any:
        raise KeyError("secret-in-the-message")

    provider = failing if when == "awaited" else failing_at_call
    credentials = SaslCredentials("OAUTHBEARER", token_provider=provider)
    with pytest.raises(AuthenticationError, match="sasl_oauth_token_provider raised KeyError") as raised:
        await credentials.new_client()
    assert isinstance(raised.value.__cause__, KeyError)
    assert "secret-in-the-message" not in str(raised.value)
