"""The schema-driven codec: compiles a Message declaration for one version into an encoder and a decoder, once.

Owns the mapping of field types to wire encodings (classic vs. compact, tagged fields). Knows nothing of framing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol.primitives import (
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    UINT16,
    UINT32,
    Reader,
    encode_uvarint,
)
from aioproducer.protocol.schema import Field, Message

__all__ = ["BLOB_BY_REFERENCE", "MAX_STRING_BYTES", "Codec", "Writer", "codec_for"]

Encoder = Callable[["Writer", Any], None]
Decoder = Callable[[Reader], Any]

# Blobs at least this large (record batches) are kept by reference and joined once into the frame, not copied twice.
BLOB_BY_REFERENCE = 512
# Java's generated code refuses strings whose UTF-8 form does not fit an int16 length, even in compact form.
# Kafka strings, compact or not, hold at most Short.MAX_VALUE bytes of UTF-8 (Java's Type.STRING / COMPACT_STRING).
MAX_STRING_BYTES = 0x7FFF
_FIXED = {"int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64, "uint16": UINT16, "uint32": UINT32}
_MIN_SIZE = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "float64": 8}


class Writer:
    """Accumulates an encoding: small values in one bytearray, large blobs by reference (zero extra copies)."""

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[bytes | bytearray | memoryview] = []

    def blob(self, data: bytes | bytearray | memoryview) -> None:
        """Append raw bytes, by reference when large."""
        if len(data) < BLOB_BY_REFERENCE:
            self.buf += data
            return
        if self.buf:
            self.parts.append(self.buf)
            self.buf = bytearray()
        self.parts.append(data)

    def chunks(self) -> list[bytes | bytearray | memoryview]:
        """Everything written so far, in order; the writer must not be used afterwards."""
        if self.buf:
            self.parts.append(self.buf)
        return self.parts

    def getvalue(self) -> bytes:
        """Everything written so far as one bytes object."""
        return b"".join(self.chunks())


@dataclass(frozen=True, slots=True)
class Codec:
    """One message at one version: `encode(writer, body)` and `decode(reader) -> dict`."""

    message: Message
    version: int
    flexible: bool
    encode: Encoder
    decode: Decoder


_CACHE: dict[tuple[str, int], Codec] = {}


def codec_for(message: Message, version: int) -> Codec:
    """The compiled codec for `message` at `version`; UnsupportedVersionError outside the versions we speak."""
    key = (message.name, version)
    codec = _CACHE.get(key)
    if codec is None:
        if version not in message.supported:
            raise UnsupportedVersionError(f"{message.name} v{version} is not supported (we speak {message.supported})")
        flexible = version in message.flexible
        encode, decode, _ = _struct(message.fields, version, flexible)
        codec = _CACHE[key] = Codec(message, version, flexible, encode, decode)
    return codec


def _struct(fields: tuple[Field, ...], version: int, flexible: bool) -> tuple[Encoder, Decoder, int]:
    """Compile a struct: its positional fields in order, then (flexible versions) its tagged-field section."""
    regular: list[tuple[str, Encoder, Decoder, Any]] = []
    tagged: list[tuple[int, str, Encoder, Decoder, Any]] = []
    absent: list[Field] = []
    min_size = 1 if flexible else 0
    for fld in fields:
        if version not in fld.versions:
            absent.append(fld)
            continue
        enc, dec, size = _field(fld, version, flexible)
        if flexible and fld.tag is not None and version in fld.tagged:
            tagged.append((fld.tag, fld.name, enc, dec, fld))
        else:
            regular.append((fld.name, enc, dec, fld.default()))
            min_size += size
    tagged.sort(key=lambda item: item[0])
    encode_tags = _tag_encoder(tagged) if flexible and tagged else None
    decode_tags = _tag_decoder(tagged) if flexible else None
    regular_enc = tuple((name, enc, default) for name, enc, _, default in regular)
    regular_dec = tuple((name, dec) for name, _, dec, _ in regular)
    fill = tuple((fld.name, fld) for fld in absent) + tuple((fld.name, fld) for *_, fld in tagged)

    def encode(w: Writer, value: Mapping[str, Any]) -> None:
        get = value.get
        for name, enc, default in regular_enc:
            enc(w, get(name, default))
        if encode_tags is not None:
            encode_tags(w, value)
        elif flexible:
            w.buf.append(0)  # an empty tagged-field section

    def decode(r: Reader) -> dict[str, Any]:
        out = {name: dec(r) for name, dec in regular_dec}
        for name, fld in fill:
            out[name] = fld.default()
        if decode_tags is not None:
            decode_tags(r, out)
        return out

    return encode, decode, min_size


def _tag_encoder(tagged: list[tuple[int, str, Encoder, Decoder, Field]]) -> Callable[[Writer, Mapping[str, Any]], None]:
    defaults = []
    for tag, name, enc, _, fld in tagged:
        scratch = Writer()
        enc(scratch, fld.default())
        defaults.append((tag, name, enc, scratch.getvalue()))

    def encode_tags(w: Writer, value: Mapping[str, Any]) -> None:
        # Like Java's generated writers: a tagged field equal to its default is left out (KIP-482).
        present = []
        for tag, name, enc, default_bytes in defaults:
            if name not in value:
                continue
            scratch = Writer()
            enc(scratch, value[name])
            encoded = scratch.getvalue()
            if encoded != default_bytes:
                present.append((tag, encoded))
        w.buf += encode_uvarint(len(present))
        for tag, encoded in present:
            w.buf += encode_uvarint(tag)
            w.buf += encode_uvarint(len(encoded))
            w.blob(encoded)

    return encode_tags


def _tag_decoder(tagged: list[tuple[int, str, Encoder, Decoder, Field]]) -> Callable[[Reader, dict[str, Any]], None]:
    known = {tag: (name, dec) for tag, name, _, dec, _ in tagged}

    def decode_tags(r: Reader, out: dict[str, Any]) -> None:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            size = r.uvarint()
            entry = known.get(tag)
            if entry is None:
                r.skip(size)  # a tag from a newer schema: skipping it is the point of tagged fields
                continue
            outer_end = r.end
            field_end = r.pos + size
            if field_end > outer_end:
                raise ProtocolError(f"tagged field {tag} overruns its struct")
            r.end = field_end
            out[entry[0]] = entry[1](r)
            if r.pos != field_end:
                raise ProtocolError(f"tagged field {tag} declares {size} bytes but its value ends elsewhere")
            r.end = outer_end

    return decode_tags


def _field(fld: Field, version: int, flexible: bool) -> tuple[Encoder, Decoder, int]:
    """Compile one field (array or not) for `version`; returns encoder, decoder and minimal wire size."""
    compact = flexible if fld.flexible is None else version in fld.flexible
    nullable = version in fld.nullable
    if fld.is_struct:
        element = _struct(fld.fields, version, flexible)
    else:
        element = _primitive(fld, fld.element_type, compact, nullable and not fld.is_array)
    if not fld.is_array:
        return element
    return _array(fld, element, compact, nullable)


def _array(
    fld: Field, element: tuple[Encoder, Decoder, int], compact: bool, nullable: bool
) -> tuple[Encoder, Decoder, int]:
    enc_item, dec_item, item_size = element
    item_size = max(item_size, 1)
    name = fld.name

    def encode(w: Writer, items: Any) -> None:
        if items is None:
            if not nullable:
                raise ProtocolError(f"field {name!r} is not nullable in this version")
            w.buf += b"\x00" if compact else b"\xff\xff\xff\xff"
            return
        w.buf += encode_uvarint(len(items) + 1) if compact else INT32.pack(len(items))
        for item in items:
            enc_item(w, item)

    def decode(r: Reader) -> list[Any] | None:
        count = r.uvarint() - 1 if compact else r.int32()
        if count < 0:
            if count == -1 and nullable:
                return None
            raise ProtocolError(f"array {name!r} has invalid length {count}")
        # A hostile count must fail fast instead of allocating or looping: each item takes >= item_size bytes.
        if count * item_size > r.remaining:
            raise ProtocolError(f"array {name!r} claims {count} items but only {r.remaining} bytes remain")
        return [dec_item(r) for _ in range(count)]

    return encode, decode, 1 if compact else 4


def _primitive(fld: Field, type_: str, compact: bool, nullable: bool) -> tuple[Encoder, Decoder, int]:
    fixed = _FIXED.get(type_)
    if fixed is not None:
        return _fixed_codec(fixed)
    if type_ == "bool":
        return _bool_codec()
    if type_ == "float64":
        return _fixed_codec(FLOAT64)
    if type_ == "uuid":
        return _uuid_codec()
    if type_ == "string":
        return _string_codec(fld.name, compact, nullable)
    if type_ in ("bytes", "records"):
        return _bytes_codec(fld.name, compact, nullable)
    raise TypeError(f"unknown Kafka type {type_!r} in field {fld.name!r}")


def _fixed_codec(fmt: Any) -> tuple[Encoder, Decoder, int]:
    pack = fmt.pack

    def encode(w: Writer, value: Any) -> None:
        w.buf += pack(value)

    def decode(r: Reader) -> Any:
        return r.fixed(fmt)

    return encode, decode, int(fmt.size)


def _bool_codec() -> tuple[Encoder, Decoder, int]:
    def encode(w: Writer, value: Any) -> None:
        w.buf.append(1 if value else 0)

    return encode, Reader.boolean, 1


def _uuid_codec() -> tuple[Encoder, Decoder, int]:
    def encode(w: Writer, value: Any) -> None:
        raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
        if len(raw) != 16:
            raise ProtocolError(f"a UUID is 16 bytes, got {len(raw)}")
        w.buf += raw

    return encode, Reader.uuid, 16


def _length_prefix(compact: bool, size: int, wide: bool) -> bytes:
    if compact:
        return encode_uvarint(size + 1)
    return INT32.pack(size) if wide else INT16.pack(size)


def _string_codec(name: str, compact: bool, nullable: bool) -> tuple[Encoder, Decoder, int]:
    null = b"\x00" if compact else b"\xff\xff"

    def encode(w: Writer, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ProtocolError(f"string field {name!r} is not nullable in this version")
            w.buf += null
            return
        raw = value.encode("utf-8")
        if len(raw) > MAX_STRING_BYTES:
            raise ProtocolError(f"string field {name!r} is {len(raw)} bytes; Kafka strings hold at most 32767")
        w.buf += _length_prefix(compact, len(raw), wide=False)
        w.buf += raw

    def decode(r: Reader) -> str | None:
        size = r.uvarint() - 1 if compact else r.int16()
        if size < 0:
            if size == -1 and nullable:
                return None
            raise ProtocolError(f"string field {name!r} has invalid length {size}")
        return r.text(size)

    return encode, decode, 1 if compact else 2


def _bytes_codec(name: str, compact: bool, nullable: bool) -> tuple[Encoder, Decoder, int]:
    null = b"\x00" if compact else b"\xff\xff\xff\xff"

    def encode(w: Writer, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ProtocolError(f"bytes field {name!r} is not nullable in this version")
            w.buf += null
            return
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ProtocolError(
                f"bytes field {name!r} needs bytes, bytearray or memoryview, got {type(value).__name__}"
            )
        size = value.nbytes if isinstance(value, memoryview) else len(value)
        w.buf += _length_prefix(compact, size, wide=True)
        w.blob(value)

    def decode(r: Reader) -> bytes | None:
        size = r.uvarint() - 1 if compact else r.int32()
        if size < 0:
            if size == -1 and nullable:
                return None
            raise ProtocolError(f"bytes field {name!r} has invalid length {size}")
        return bytes(r.raw(size))

    return encode, decode, 1 if compact else 4
