"""Types of the compiled twin of `aioproducer.deliveries.bulk` (see that module for the behaviour)."""

from collections.abc import Callable, Iterable
from typing import Any

from aioproducer.deliveries.delivery import BatchOutcome

class BulkDeliveries:
    def __len__(self) -> int: ...
    def add(self, item: Any) -> None: ...
    def add_waitables(self, items: Iterable[Any]) -> dict[int, Any]: ...
    def is_delivery(self, position: int) -> bool: ...
    def outcomes(self, start: int = ..., stop: int | None = ...) -> list[BatchOutcome]: ...
    def results(
        self,
        resolve: Callable[[BatchOutcome, int], tuple[BatchOutcome, int]],
        start: int = ...,
        stop: int | None = ...,
    ) -> list[Any]: ...
    def fill_settled(
        self,
        resolve: Callable[[BatchOutcome, int], tuple[BatchOutcome, int]],
        results: list[Any],
        start: int,
        stop: int,
        unbuilt: object,
    ) -> int: ...
