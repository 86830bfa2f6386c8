"""A FastAPI app that publishes events: the producer lives in the app's lifespan, a POST handler awaits `send`.

KAFKA_BOOTSTRAP=127.0.0.1:9092 uvicorn examples.fastapi_app:app
curl -X POST localhost:8000/events/clicks -H 'content-type: application/json' -d '{"user": "ada"}'
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request

from aioproducer import Producer
from aioproducer.errors import AioProducerError, InvalidRecordError


def create_app(bootstrap: str | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        servers = bootstrap or os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
        # Shutdown waits at most 10 s for undelivered events (then fails them), inside a 30 s grace period.
        settings = {"value_serializer": "json", "key_serializer": "str", "close_timeout_ms": 10_000}
        async with Producer(servers, **settings) as producer:
            app.state.producer = producer
            yield

    app = FastAPI(lifespan=lifespan)

    @app.post("/events/{topic}")
    async def publish(topic: str, event: dict[str, Any], request: Request) -> dict[str, Any]:
        producer: Producer = request.app.state.producer
        try:
            md = await producer.send(topic, event, key=str(event.get("user", "")))
        except InvalidRecordError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        except AioProducerError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        return {"topic": md.topic, "partition": md.partition, "offset": md.offset, "event": json.dumps(event)}

    return app


app = create_app()
