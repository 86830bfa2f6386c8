"""The protocol package's shape: its public names, and the purity rules it keeps (no I/O, no clock, no asserts)."""

from __future__ import annotations

import ast
from pathlib import Path

import aioproducer.protocol as protocol

PACKAGE = Path(protocol.__file__).parent
KAFKA_ERRORS = PACKAGE.parent / "kafka_errors.py"
ERROR_CODES = PACKAGE.parent / "error_codes.py"
FORBIDDEN = {"asyncio", "socket", "anyio", "time", "datetime", "selectors", "ssl", "threading"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_public_names() -> None:
    contract = {
        "ApiKey",
        "SUPPORTED_VERSIONS",
        "encode_request",
        "decode_response",
        "encode_response",
        "decode_request",
        "FrameDecoder",
        "negotiate_versions",
        "api_versions_error_code",
        "api_versions_fallback_version",
    }
    extras = {
        "DEFAULT_MAX_FRAME_BYTES",
        "MAX_STRING_BYTES",
        "RequestHeader",
        "api_version_ranges",
        "decode_request_header",
    }
    transactions = {
        "TRANSACTION_V2_VERSIONS",
        "TRANSACTION_VERSION",
        "Coordinator",
        "CoordinatorType",
        "FinalizedFeatures",
        "coordinators_from_response",
        "finalized_features",
        "find_coordinator_body",
        "transaction_versions",
    }
    assert set(protocol.__all__) == contract | extras | transactions
    assert all(hasattr(protocol, name) for name in protocol.__all__)


def test_api_keys_are_kafkas() -> None:
    assert {key.name: int(key) for key in protocol.ApiKey} == {
        "PRODUCE": 0,
        "METADATA": 3,
        "FIND_COORDINATOR": 10,
        "SASL_HANDSHAKE": 17,
        "API_VERSIONS": 18,
        "CREATE_TOPICS": 19,
        "INIT_PRODUCER_ID": 22,
        "ADD_PARTITIONS_TO_TXN": 24,
        "ADD_OFFSETS_TO_TXN": 25,
        "END_TXN": 26,
        "TXN_OFFSET_COMMIT": 28,
        "SASL_AUTHENTICATE": 36,
        "DESCRIBE_TRANSACTIONS": 65,
    }


def test_protocol_is_sans_io_and_depends_only_on_errors() -> None:
    for path in [*PACKAGE.glob("*.py"), KAFKA_ERRORS, ERROR_CODES]:
        imports = _imports(path)
        assert not {name.split(".")[0] for name in imports} & FORBIDDEN, path.name
        ours = {name for name in imports if name.startswith("aioproducer")}
        allowed = {"aioproducer", "aioproducer.errors", "aioproducer.error_codes"}
        allowed |= {n for n in ours if n.startswith("aioproducer.protocol")}
        assert ours <= allowed, f"{path.name} imports {ours - allowed}"


def test_no_assert_statements_in_package_code() -> None:
    for path in [*PACKAGE.glob("*.py"), KAFKA_ERRORS, ERROR_CODES]:
        assert not any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(path.read_text()))), path.name


def test_every_module_opens_with_a_docstring() -> None:
    for path in [*PACKAGE.glob("*.py"), KAFKA_ERRORS, ERROR_CODES]:
        docstring = ast.get_docstring(ast.parse(path.read_text()))
        assert docstring and len(docstring.splitlines()) <= 3, path.name
