"""A message schema's fields at one version, as nested tuples, for tests that hold a hand-written reader or writer of
one message (produce_answers, produce_requests) to the layout it assumes."""

from __future__ import annotations

from typing import Any


def layout(fields: Any, version: int) -> list[Any]:
    """(name, type, tag, nullable at `version`, the struct's own layout) for each field present at `version`."""
    return [
        (field.name, field.type, field.tag, version in field.nullable, layout(field.fields, version))
        for field in fields
        if version in field.versions
    ]
