"""The process's Prometheus registry and the ``GET /metrics`` route, negotiated as Prometheus scrapes: the
OpenMetrics format (with the duration histograms' trace-ID exemplars) when ``Accept`` asks for
``application/openmetrics-text``, else the classic text format 0.0.4 (no exemplars; it has no syntax for them).

One registry per app (not prometheus_client's global one), so several servers in one test process
stay apart. Components register their metrics on it through their own classes, e.g.
``collector.metrics.IngestMetrics(registry)``; add span metrics or service-graph metrics the same way.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import choose_encoder


def new_registry() -> CollectorRegistry:
    """An empty registry for one app."""
    return CollectorRegistry(auto_describe=True)


def record_role(registry: CollectorRegistry, role: str) -> None:
    """``hotspan_role{role="<role>"} 1`` on ``registry``: what the process runs (``hotspan.roles``), so a scrape of
    many processes tells collectors, query nodes and pipeline workers apart."""
    Gauge("hotspan_role", "What this Hotspan process runs (1 for its role)", ["role"], registry=registry).labels(
        role=role
    ).set(1)


def build_router(registry: CollectorRegistry) -> APIRouter:
    """``GET /metrics``: every metric of ``registry``, in the format the ``Accept`` header picks (prometheus_client's
    own negotiation, the one its HTTP server uses)."""
    router = APIRouter(tags=["service"])

    @router.get(
        "/metrics",
        operation_id="metrics",
        summary="Hotspan's own metrics in the Prometheus text or OpenMetrics format",
        description="OpenMetrics, with trace-ID exemplars on the duration histograms' buckets, when the Accept"
        " header asks for application/openmetrics-text (as Prometheus does); else the text format 0.0.4.",
        response_class=Response,
    )
    def metrics(request: Request) -> Response:
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), media_type=content_type)

    return router
