"""A FastAPI service that publishes events to Kafka, written as it should be copied.

- One producer for the app, opened and closed by the lifespan; handlers get it through `Depends` (`ProducerDep`),
  so tests swap it for `aioproducer.testing.MockProducer` with `app.dependency_overrides`.
- Topics come from an allow-list (`Settings.topics`): the URL names an event kind, never a topic.
- `POST /events/{kind}` waits for the broker's acknowledgement and answers 200 with where the event landed;
  `POST /events/{kind}/async` buffers it with `enqueue` and answers 202 at once — a delivery failure is logged.
- `/ready` and `/live` are the Kubernetes probes (`producer.health()`): ready once `start()` got the cluster's
  metadata, not ready while no broker answers; not live only when a restart would help.
- Shutdown is bounded: `close(timeout=...)` fits inside the server's grace period (Kubernetes gives 30 s by default,
  uvicorn's `--timeout-graceful-shutdown` likewise); what is still undelivered then fails and is logged.

    KAFKA_BOOTSTRAP=127.0.0.1:9092 uvicorn examples.fastapi_app:app
    curl -X POST localhost:8000/events/clicks -H 'content-type: application/json' -d '{"user": "ada"}'
    curl localhost:8000/ready     # 200 when the producer can deliver, 503 with the reason otherwise
    curl localhost:8000/live      # 503 only when a restart would help
    curl localhost:8000/metrics   # the producer's metrics for Prometheus
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from aioproducer import Delivery, Producer
from aioproducer.contrib.prometheus import ProducerCollector
from aioproducer.errors import AioProducerError, InvalidRecordError, KafkaTimeoutError

log = logging.getLogger("events")


class EventKind(str, Enum):
    """The events this service accepts; each maps to a topic in `Settings.topics`."""

    clicks = "clicks"
    orders = "orders"


@dataclass(frozen=True)
class Settings:
    bootstrap: str = field(default_factory=lambda: os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    topics: dict[EventKind, str] = field(
        default_factory=lambda: {EventKind.clicks: "web.clicks", EventKind.orders: "shop.orders"}
    )
    # Below the platform's grace period, leaving time for the server to finish in-flight requests first.
    shutdown_grace_s: float = 20.0
    # A handler should not hang for minutes when the cluster is away: max_block_ms bounds the wait for metadata and
    # buffer memory, delivery_timeout_ms the wait for a buffered record's acknowledgement (Java's defaults: 60 s and
    # 120 s; it must be at least linger_ms + request_timeout_ms).
    max_block_ms: int = 5000
    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 10_000


def default_producer(settings: Settings) -> Producer:
    return Producer(
        settings.bootstrap,
        value_serializer="json",
        key_serializer="str",
        linger_ms=5,
        max_block_ms=settings.max_block_ms,
        request_timeout_ms=settings.request_timeout_ms,
        delivery_timeout_ms=settings.delivery_timeout_ms,
    )


def get_producer(request: Request) -> Producer:
    producer: Producer = request.app.state.producer
    return producer


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


ProducerDep = Annotated[Producer, Depends(get_producer)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


def log_failure(delivery: Delivery) -> None:
    """Done-callback of a fire-and-forget event: the caller got its 202 long ago, so the log is its only trace."""
    if not delivery.cancelled() and delivery.exception() is not None:
        log.error("event not delivered: %r", delivery.exception())


def create_app(
    settings: Settings | None = None, producer_factory: Callable[[Settings], Any] = default_producer
) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        producer = producer_factory(settings)
        await producer.start()
        app.state.producer = producer
        # A registry of the app's own (not the process-wide default), so that two apps never collide.
        app.state.metrics = CollectorRegistry()
        app.state.metrics.register(ProducerCollector(producer))
        try:
            yield
        finally:
            # Bounded: whatever is not delivered after the grace period fails (and is logged by its callback).
            await producer.close(timeout=settings.shutdown_grace_s)

    app = FastAPI(lifespan=lifespan)
    app.state.settings = settings

    @app.post("/events/{kind}")
    async def publish(
        kind: EventKind, event: dict[str, Any], producer: ProducerDep, cfg: SettingsDep
    ) -> dict[str, Any]:
        """Publish and wait for the acknowledgement: the answer says where the event is stored."""
        try:
            md = await producer.send(cfg.topics[kind], event, key=str(event.get("user", "")))
        except InvalidRecordError as exc:
            raise HTTPException(422, str(exc)) from exc
        except AioProducerError as exc:
            raise _unavailable(exc) from exc
        return {"topic": md.topic, "partition": md.partition, "offset": md.offset}

    @app.post("/events/{kind}/async", status_code=status.HTTP_202_ACCEPTED)
    async def publish_later(kind: EventKind, event: dict[str, Any], producer: ProducerDep, cfg: SettingsDep) -> Any:
        """Buffer and answer at once; the event is delivered in the background (or its failure is logged)."""
        try:
            delivery = await producer.enqueue(cfg.topics[kind], event, key=str(event.get("user", "")))
        except InvalidRecordError as exc:
            raise HTTPException(422, str(exc)) from exc
        except AioProducerError as exc:
            raise _unavailable(exc) from exc
        delivery.add_done_callback(log_failure)
        return JSONResponse({"accepted": True}, status_code=status.HTTP_202_ACCEPTED)

    @app.get("/ready")
    async def ready(producer: ProducerDep, response: Response) -> dict[str, Any]:
        """Readiness: the cluster answered within its metadata refresh bound (`health().ready`); 503 says why not."""
        health = producer.health()
        if not health.ready:
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        return {
            "ready": health.ready,
            "reason": health.reason,
            "metadata_age_s": health.metadata_age_s,
            "brokers": list(health.connected_brokers),
            "buffer_used_bytes": health.buffer_used_bytes,
            "last_error": health.last_error,
            "last_error_age_s": health.last_error_age_s,
        }

    @app.get("/live")
    async def live(producer: ProducerDep, response: Response) -> dict[str, Any]:
        """Liveness: 503 only when a restart would help (the producer closed, its sender crashed, a fatal error)."""
        health = producer.health()
        if not health.live:
            response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        return {"live": health.live, "state": health.state, "reason": health.reason}

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        # Collected here, on the event loop the producer runs on: no thread touches its numbers.
        return Response(generate_latest(request.app.state.metrics), media_type=CONTENT_TYPE_LATEST)

    return app


def _unavailable(exc: AioProducerError) -> HTTPException:
    # Buffer full, or cluster unreachable for max_block_ms or delivery_timeout_ms: the client may retry later.
    retry = {"Retry-After": "5"} if isinstance(exc, KafkaTimeoutError) else None
    return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"{type(exc).__name__}: {exc}", headers=retry)


app = create_app()
