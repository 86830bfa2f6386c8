"""Our message declarations against Kafka's official message JSON, field by field, for every version we claim."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from aioproducer.protocol import SUPPORTED_VERSIONS, ApiKey
from aioproducer.protocol.messages import REQUEST_HEADER, REQUESTS, RESPONSE_HEADER, RESPONSES
from aioproducer.protocol.schema import Field, Message

SHARED = Path(__file__).resolve().parents[2] / "shared"
MESSAGES_DIR = SHARED / "kafka-protocol" / "messages"

_ZERO = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": uuid.UUID(int=0),
}


def _require_shared() -> None:
    if not MESSAGES_DIR.is_dir():
        pytest.fail(f"Kafka's message specs are missing: expected {MESSAGES_DIR} (clone shared/ beside the repo)")


def load_spec(name: str) -> dict[str, Any]:
    """Parse one message JSON: whole-line // comments dropped, as the shared README prescribes."""
    _require_shared()
    text = (MESSAGES_DIR / f"{name}.json").read_text()
    spec: dict[str, Any] = json.loads(
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    )
    return spec


def parse_versions(spec: str | None, highest: int = 0x7FFF) -> set[int]:
    """Kafka's version syntax as a set of versions, independent of aioproducer's parser."""
    if spec is None or spec == "none":
        return set()
    if spec.endswith("+"):
        return set(range(int(spec[:-1]), highest + 1))
    low, _, high = spec.partition("-")
    return set(range(int(low), int(high or low) + 1))


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def json_default(spec: dict[str, Any]) -> Any:
    """The default the brief prescribes: JSON `default`, else zero / "" / [] / False; "null" is None."""
    kafka_type = spec["type"]
    raw = spec.get("default")
    if kafka_type.startswith("[]"):
        assert raw in (None, "null")
        return None if raw == "null" else []
    if "fields" in spec and kafka_type not in _ZERO:
        return {snake(sub["name"]): json_default(sub) for sub in spec["fields"]}
    if raw is None:
        return _ZERO[kafka_type]
    if raw == "null":
        return None
    if kafka_type == "bool":
        return {"true": True, "false": False}[raw]
    if kafka_type.startswith(("int", "uint")):
        return int(raw)
    return raw


def field_at(spec: dict[str, Any], version: int, message_flexible: set[int]) -> dict[str, Any] | None:
    """What the JSON says one field looks like at one version, or None if absent there."""
    if version not in parse_versions(spec["versions"]):
        return None
    own_flexible = spec.get("flexibleVersions")
    return {
        "type": spec["type"],
        "nullable": version in parse_versions(spec.get("nullableVersions")),
        "tag": spec.get("tag") if version in parse_versions(spec.get("taggedVersions")) else None,
        "compact": version in (parse_versions(own_flexible) if own_flexible is not None else message_flexible),
        "default": json_default(spec),
        "fields": {snake(sub["name"]): sub for sub in spec.get("fields", [])},
    }


def ours_at(fld: Field, version: int, message_flexible: bool) -> dict[str, Any] | None:
    if version not in fld.versions:
        return None
    return {
        "type": fld.type,
        "nullable": version in fld.nullable,
        "tag": fld.tag if version in fld.tagged else None,
        "compact": message_flexible if fld.flexible is None else version in fld.flexible,
        "default": fld.default(),
        "fields": {sub.name: sub for sub in fld.fields},
    }


def compare_fields(
    path: str, theirs: dict[str, dict[str, Any]], ours: dict[str, Field], version: int, flexible: set[int]
) -> None:
    assert list(ours) == list(theirs), f"{path} v{version}: field names/order differ"
    for name, spec in theirs.items():
        expected = field_at(spec, version, flexible)
        actual = ours_at(ours[name], version, version in flexible)
        where = f"{path}.{name} v{version}"
        if expected is None or actual is None:
            assert expected is actual, f"{where}: presence differs (JSON {expected is not None})"
            continue
        for key in ("type", "nullable", "tag", "compact", "default"):
            assert actual[key] == expected[key], f"{where}: {key} is {actual[key]!r}, JSON says {expected[key]!r}"
        assert bool(actual["fields"]) == bool(expected["fields"]), f"{where}: struct-ness differs"
        if expected["fields"]:
            compare_fields(where, expected["fields"], actual["fields"], version, flexible)


def compare_message(spec: dict[str, Any], message: Message) -> list[int]:
    valid = parse_versions(spec["validVersions"])
    flexible = parse_versions(spec["flexibleVersions"])
    claimed = [v for v in range(message.supported.low, message.supported.high + 1)]
    assert claimed, f"{message.name}: claims no versions"
    assert set(claimed) <= valid, f"{message.name}: claims versions the spec does not define"
    assert message.name == spec["name"]
    if "apiKey" in spec:
        assert message.api_key == spec["apiKey"]
    for version in claimed:
        assert (version in message.flexible) == (version in flexible), f"{message.name} v{version}: flexibility"
        theirs = {snake(s["name"]): s for s in spec["fields"]}
        compare_fields(message.name, theirs, {fld.name: fld for fld in message.fields}, version, flexible)
    return claimed


@pytest.mark.parametrize("api", list(ApiKey), ids=lambda api: api.name)
def test_requests_match_kafka_json(api: ApiKey) -> None:
    message = REQUESTS[api]
    claimed = compare_message(load_spec(message.name), message)
    assert (claimed[0], claimed[-1]) == SUPPORTED_VERSIONS[api]


@pytest.mark.parametrize("api", list(ApiKey), ids=lambda api: api.name)
def test_responses_match_kafka_json(api: ApiKey) -> None:
    message = RESPONSES[api]
    claimed = compare_message(load_spec(message.name), message)
    assert (claimed[0], claimed[-1]) == SUPPORTED_VERSIONS[api]


def test_headers_match_kafka_json() -> None:
    assert compare_message(load_spec("RequestHeader"), REQUEST_HEADER) == [0, 1, 2]
    assert compare_message(load_spec("ResponseHeader"), RESPONSE_HEADER) == [0, 1]


def test_claimed_versions_are_the_briefed_ones() -> None:
    assert dict(SUPPORTED_VERSIONS) == {
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.METADATA: (1, 12),
        ApiKey.PRODUCE: (3, 11),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.CREATE_TOPICS: (2, 7),
    }


def test_drift_check_notices_a_wrong_declaration() -> None:
    """The comparison itself must fail when a declaration drifts, or a green run proves nothing."""
    from dataclasses import replace

    spec = load_spec("ProduceResponse")
    good = RESPONSES[ApiKey.PRODUCE]
    topic = good.fields[0]
    partition = topic.fields[1]
    drifted_log_start = replace(partition.fields[4], versions=replace(partition.fields[4].versions, low=6))
    bad_partition = replace(partition, fields=(*partition.fields[:4], drifted_log_start, *partition.fields[5:]))
    bad = replace(good, fields=(replace(topic, fields=(topic.fields[0], bad_partition)), *good.fields[1:]))
    with pytest.raises(AssertionError, match="log_start_offset v5: presence"):
        compare_message(spec, bad)
