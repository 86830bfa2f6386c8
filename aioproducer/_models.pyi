"""Types of the compiled twin of `aioproducer.models`' record constructor (see that module for the behaviour)."""

from typing import Any

from aioproducer import models

def adopt(record_type: type[models.ProducerRecord]) -> None: ...

# Named after the class it builds (an argument error names it): the function is ProducerRecord.__new__.
def ProducerRecord(
    cls: type[models.ProducerRecord],
    topic: str,
    value: Any = ...,
    *,
    key: Any = ...,
    headers: models.Headers | None = ...,
    partition: int | None = ...,
    timestamp_ms: int | None = ...,
) -> models.ProducerRecord: ...
