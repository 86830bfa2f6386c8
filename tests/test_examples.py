"""The examples run for real against the test broker: the asyncio service, the FastAPI app and the demo."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from aioproducer.testing import ConsumedRecord

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_asyncio_service_publishes_every_order_in_order_per_customer(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(3)
    delivered = await load("asyncio_service").run_service(bootstrap, topic, 60, workers=3)
    assert len(delivered) == 60
    records = read_back_records(topic)
    orders = [json.loads(r.value or b"") for r in records]
    assert sorted(o["order"] for o in orders) == list(range(60))
    for customer in range(7):
        mine = [o["order"] for o in orders if o["customer"] == customer]
        assert len({r.partition for r in records if r.key == str(customer).encode()}) == 1
        assert len(mine) == len(set(mine))


async def test_fastapi_app_publishes_from_a_post_handler(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(2)
    app = load("fastapi_app").create_app(bootstrap)
    # The app's own lifespan opens and closes the producer, as a server would run it.
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            answers = [await client.post(f"/events/{topic}", json={"user": f"u{i}", "n": i}) for i in range(5)]
            bad = await client.post("/events/not a topic", json={"user": "x"})
            ready = await client.get("/ready")
            scraped = await client.get("/metrics")
    assert [a.status_code for a in answers] == [200] * 5
    assert bad.status_code == 422 and "invalid topic name" in bad.json()["detail"]
    assert ready.status_code == 200 and ready.json()["ready"] is True and ready.json()["brokers"]
    assert 'aioproducer_record_send_total{client_id="aioproducer"} 5.0' in scraped.text
    assert f'aioproducer_topic_record_send_total{{client_id="aioproducer",topic="{topic}"}} 5.0' in scraped.text
    records = read_back_records(topic)
    assert sorted(json.loads(r.value or b"")["n"] for r in records) == list(range(5))
    assert {r.key for r in records} == {f"u{i}".encode() for i in range(5)}


def test_demo_produces_reads_back_and_reports(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    demo = load("demo")
    assert demo.main(["--bootstrap", bootstrap, "--records", "3000", "--compression", "zstd", "--partitions", "3"]) == 0
    out = capsys.readouterr().out
    assert "delivered 3,000 records, failed 0" in out
    assert "read back 3,000 records" in out and "OK: every record" in out
