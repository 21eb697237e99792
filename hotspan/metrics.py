"""The process's Prometheus registry and the ``GET /metrics`` route (text exposition format 0.0.4).

One registry per app (not prometheus_client's global one), so several servers in one test process
stay apart. Components register their metrics on it through their own classes, e.g.
``collector.metrics.IngestMetrics(registry)``; add span metrics or service-graph metrics the same way.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest


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
    """``GET /metrics``: every metric of ``registry``."""
    router = APIRouter(tags=["service"])

    @router.get(
        "/metrics",
        operation_id="metrics",
        summary="Hotspan's own metrics in the Prometheus text format",
        response_class=Response,
    )
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
