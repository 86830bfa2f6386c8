"""A FastAPI app that publishes events: the producer lives in the app's lifespan, a POST handler awaits `send`.

KAFKA_BOOTSTRAP=127.0.0.1:9092 uvicorn examples.fastapi_app:app
curl -X POST localhost:8000/events/clicks -H 'content-type: application/json' -d '{"user": "ada"}'
curl localhost:8000/ready     # 200 when the producer can deliver, 503 with the reason otherwise
curl localhost:8000/metrics   # the producer's metrics for Prometheus
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from aioproducer import Producer
from aioproducer.contrib.prometheus import ProducerCollector
from aioproducer.errors import AioProducerError, InvalidRecordError


def create_app(bootstrap: str | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        servers = bootstrap or os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")
        async with Producer(servers, value_serializer="json", key_serializer="str") as producer:
            app.state.producer = producer
            # A registry of the app's own (not the process-wide default), so that two apps never collide.
            app.state.metrics = CollectorRegistry()
            app.state.metrics.register(ProducerCollector(producer))
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

    @app.get("/ready")
    async def ready(request: Request, response: Response) -> dict[str, Any]:
        health = request.app.state.producer.health()
        if not health.ready:
            response.status_code = 503
        return {
            "ready": health.ready,
            "brokers": list(health.connected_brokers),
            "buffer_used_bytes": health.buffer_used_bytes,
            "last_error": health.last_error,
            "last_error_age_s": health.last_error_age_s,
        }

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        # Collected here, on the event loop the producer runs on: no thread touches its numbers.
        return Response(generate_latest(request.app.state.metrics), media_type=CONTENT_TYPE_LATEST)

    return app


app = create_app()
