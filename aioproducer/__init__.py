"""aioproducer: an asyncio-native Kafka producer. This module holds the public API only."""

from __future__ import annotations

__all__: list[str] = []
