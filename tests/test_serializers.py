"""Tests for aioproducer.serializers: the built-in serializers, their errors, and `resolve_serializer`."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer import serializers
from aioproducer.errors import ConfigError, InvalidRecordError
from aioproducer.serializers import (
    bytes_serializer,
    json_serializer,
    resolve_serializer,
    str_serializer,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def test_public_names() -> None:
    expected = {"BUILTIN_SERIALIZERS", "ContextSerializer", "RecordSerializer", "Role", "Serializer"}
    expected |= {"bytes_serializer", "json_serializer"}
    expected |= {"resolve_serializer", "str_serializer"}
    assert set(serializers.__all__) == expected
    assert all(hasattr(serializers, name) for name in expected)


# ---- bytes -------------------------------------------------------------------------------------------------


def test_bytes_pass_through_unchanged() -> None:
    data = b"\x00\xffkafka"
    assert bytes_serializer(data) is data


@pytest.mark.parametrize("view", [bytearray(b"abc"), memoryview(b"abc"), memoryview(b"xaxbxc")[1::2]])
def test_bytes_like_values_become_bytes(view: Any) -> None:
    out = bytes_serializer(view)
    assert type(out) is bytes
    assert out == bytes(view)


def test_none_stays_none_for_every_builtin() -> None:
    for name in ("bytes", "str", "json"):
        assert resolve_serializer(name)(None) is None


@pytest.mark.parametrize("obj", [42, "text", 1.5, ["a"], object()])
def test_bytes_serializer_rejects_other_types_and_says_what_to_do(obj: object) -> None:
    with pytest.raises(InvalidRecordError) as info:
        bytes_serializer(obj)
    message = str(info.value)
    assert f"value must be bytes, bytearray or memoryview, got {type(obj).__name__}" in message
    assert "value_serializer" in message and "'json'" in message


def test_errors_name_the_key_when_serializing_keys() -> None:
    with pytest.raises(InvalidRecordError, match=r"^key must be bytes.*set key_serializer"):
        resolve_serializer(None, role="key")(7)


# ---- str ---------------------------------------------------------------------------------------------------


def test_str_encodes_utf8_by_default() -> None:
    assert str_serializer()("héllo €") == "héllo €".encode()
    assert resolve_serializer("str")("ß") == b"\xc3\x9f"


def test_str_with_another_encoding() -> None:
    assert str_serializer("latin-1")("é") == b"\xe9"
    assert str_serializer("utf-16-le")("A") == b"A\x00"


def test_str_encodings_are_normalized_so_equal_settings_compare_equal() -> None:
    assert str_serializer("UTF8") == str_serializer("utf-8") == resolve_serializer("str")


def test_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown text encoding 'utf-9'"):
        str_serializer("utf-9")


def test_str_refuses_non_str() -> None:
    with pytest.raises(InvalidRecordError, match=r"^value must be str for value_serializer='str', got bytes"):
        str_serializer()(b"already bytes")


def test_str_unencodable_text_is_an_invalid_record() -> None:
    with pytest.raises(InvalidRecordError, match="cannot be encoded as ascii") as info:
        str_serializer("ascii")("é")
    assert isinstance(info.value.__cause__, UnicodeEncodeError)


def test_lone_surrogate_cannot_be_utf8() -> None:
    with pytest.raises(InvalidRecordError, match="utf-8"):
        str_serializer()("\ud800")


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_str_round_trips(text: str) -> None:
    try:
        expected = text.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates: covered by test_lone_surrogate_cannot_be_utf8
    data = str_serializer()(text)
    assert data == expected
    assert data is not None and data.decode("utf-8") == text


# ---- json --------------------------------------------------------------------------------------------------


def test_json_is_compact_utf8() -> None:
    assert json_serializer({"a": 1, "b": [1, 2.5, None, True]}) == b'{"a":1,"b":[1,2.5,null,true]}'
    assert json_serializer("é") == b'"\xc3\xa9"'
    assert json_serializer({"z": 1, "a": 2}) == b'{"z":1,"a":2}'  # key order kept, not sorted


def test_json_none_is_a_tombstone_not_null() -> None:
    assert json_serializer(None) is None
    assert json_serializer([None]) == b"[null]"


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ({1, 2}, "not JSON serializable"),
        (b"raw", "not JSON serializable"),
        (math.nan, "Out of range float"),
        ([math.inf], "Out of range float"),
    ],
)
def test_json_refuses_what_is_not_json(obj: object, reason: str) -> None:
    with pytest.raises(InvalidRecordError, match=f"value cannot be serialized as JSON.*{reason}"):
        json_serializer(obj)


def test_json_circular_structure_is_an_invalid_record() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InvalidRecordError, match="Circular reference"):
        json_serializer(loop)


@settings(max_examples=60, deadline=None)
@given(json_values)
def test_json_round_trips_through_the_standard_parser(value: object) -> None:
    data = json_serializer(value)
    if value is None:
        assert data is None
        return
    assert data is not None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:  # pragma: no cover - the assertion below reports it
        pytest.fail("JSON output is not UTF-8")
    assert json.loads(data) == value


# ---- resolve_serializer ------------------------------------------------------------------------------------


def test_resolve_builtin_names() -> None:
    assert resolve_serializer(None)(b"x") == b"x"
    assert resolve_serializer("bytes")(bytearray(b"x")) == b"x"
    assert resolve_serializer("str")("x") == b"x"
    assert resolve_serializer("json")({"x": 1}) == b'{"x":1}'


def test_builtins_given_as_callables_take_the_role_of_their_setting() -> None:
    for builtin, bad in ((bytes_serializer, 1), (json_serializer, {1, 2}), (str_serializer(), 1)):
        with pytest.raises(InvalidRecordError, match=r"^key "):
            resolve_serializer(builtin, role="key")(bad)


@pytest.mark.parametrize(("spec", "hint"), [("jsn", "did you mean 'json'"), ("STR", "did you mean 'str'")])
def test_unknown_name_is_a_config_error_with_a_suggestion(spec: str, hint: str) -> None:
    with pytest.raises(ConfigError, match=f"unknown value_serializer '{spec}'.*{hint}"):
        resolve_serializer(spec)


def test_non_callable_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"key_serializer must be None, 'bytes', 'str', 'json' or a callable.*int"):
        resolve_serializer(5, role="key")  # type: ignore[arg-type]


def test_user_callable_result_is_used() -> None:
    serialize = resolve_serializer(lambda obj: str(obj).encode())
    assert serialize(12) == b"12"
    assert resolve_serializer(lambda obj: None)(12) is None

    def to_bytearray(obj: object) -> Any:
        return bytearray(b"ab")

    assert type(resolve_serializer(to_bytearray)(0)) is bytes


def test_user_callable_returning_str_is_an_invalid_record() -> None:
    def to_text(obj: object) -> Any:
        return str(obj)

    with pytest.raises(InvalidRecordError, match=r"value_serializer .*to_text.* returned str: it must return bytes"):
        resolve_serializer(to_text)(1)


def test_user_callable_exception_becomes_an_invalid_record_with_its_cause() -> None:
    def strict(obj: object) -> bytes:
        raise ValueError("no negatives")

    with pytest.raises(InvalidRecordError, match=r"key_serializer .*strict.* failed on a int: ValueError") as info:
        resolve_serializer(strict, role="key")(-1)
    assert isinstance(info.value.__cause__, ValueError)


def test_user_callable_raising_our_own_error_passes_through() -> None:
    def picky(obj: object) -> bytes:
        raise InvalidRecordError("topic-specific rule")

    with pytest.raises(InvalidRecordError, match=r"^topic-specific rule$"):
        resolve_serializer(picky)(1)
