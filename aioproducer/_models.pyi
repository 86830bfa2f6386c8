"""Types of the compiled twin of `aioproducer.models`' record constructor (see that module for the behaviour)."""

from collections.abc import Sequence
from typing import Any

from aioproducer.models import Header, ProducerRecord

def adopt(record_type: type[ProducerRecord]) -> None: ...
def new_producer_record(
    cls: type[ProducerRecord],
    topic: str,
    value: Any = ...,
    *,
    key: Any = ...,
    headers: Sequence[Header] | None = ...,
    partition: int | None = ...,
    timestamp_ms: int | None = ...,
) -> ProducerRecord: ...
