"""Bootstrapping a cluster's first connection."""

from __future__ import annotations

import asyncio

from aioproducer.config import ProducerConfig
from aioproducer.network.cluster import Cluster
from aioproducer.network.connection import BrokerConnection


async def test_concurrent_callers_share_one_bootstrap_connection(bootstrap: str, monkeypatch: object) -> None:
    """Regression: two callers of connect_any at once (a metadata refresh and a coordinator lookup) each opened a
    bootstrap connection; the first was overwritten and left open, unreferenced (a ResourceWarning at exit)."""
    opened: list[BrokerConnection] = []
    original = BrokerConnection.open.__func__  # type: ignore[attr-defined]

    async def recording(cls: type[BrokerConnection], *args: object, **kwargs: object) -> BrokerConnection:
        conn: BrokerConnection = await original(cls, *args, **kwargs)
        opened.append(conn)
        return conn

    monkeypatch.setattr(BrokerConnection, "open", classmethod(recording))  # type: ignore[attr-defined]
    cluster = Cluster(ProducerConfig.build(bootstrap_servers=bootstrap), lambda: None)
    try:
        first, second, third = await asyncio.gather(cluster.connect_any(), cluster.connect_any(), cluster.connect_any())
        assert first is second is third
        assert opened == [first]
    finally:
        await cluster.close()
    await asyncio.sleep(0)
    assert all(conn.closed for conn in opened)
