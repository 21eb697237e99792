"""The process's Prometheus registry and the ``GET /metrics`` route, negotiated as Prometheus scrapes: the
OpenMetrics format (with the duration histograms' trace-ID exemplars) when ``Accept`` asks for
``application/openmetrics-text``, else the classic text format 0.0.4 (no exemplars; it has no syntax for them).

One registry per app (not prometheus_client's global one), so several servers in one test process
stay apart. Components register their metrics on it through their own classes, e.g.
``collector.metrics.IngestMetrics(registry)``. Families of many series (the span and service-graph metrics,
``processors.pipeline.trace_metrics``) are not registered: they hand ``/metrics`` their families in parts
(:class:`PartedFamilies`), which it writes part by part after the registry's, each with prometheus_client's own
encoder, and streams as written. A scrape then holds one part's samples and text at a time, not 156,000 samples and
18 MiB of text at the default cardinality limit, whose fragments the heaps kept after the scrape (issue 28).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

Encoder = Callable[[Collector], bytes]
"""An exposition format's writer, as ``prometheus_client.exposition.choose_encoder`` picks it."""


class PartedFamilies(Protocol):
    """Metric families handed to ``/metrics`` in parts rather than registered."""

    def parts(self) -> Iterator[Metric]:
        """Whole families, each as consecutive parts (one or more) of the same name, documentation, type and unit,
        whose samples together are the family's; no family's parts apart from each other."""
        ...


class _Families(Collector):
    """A collector of the given families, so prometheus_client's encoders write exactly them."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = tuple(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def new_registry() -> CollectorRegistry:
    """An empty registry for one app."""
    return CollectorRegistry(auto_describe=True)


def record_role(registry: CollectorRegistry, role: str) -> None:
    """``hotspan_role{role="<role>"} 1`` on ``registry``: what the process runs (``hotspan.roles``), so a scrape of
    many processes tells collectors, query nodes and pipeline workers apart."""
    Gauge("hotspan_role", "What this Hotspan process runs (1 for its role)", ["role"], registry=registry).labels(
        role=role
    ).set(1)


def exposition(encode: Encoder, registry: Collector, parted: Sequence[PartedFamilies] = ()) -> Iterator[bytes]:
    """The text of ``registry``'s families, then of ``parted``'s, in ``encode``'s format, one piece per part: the
    same bytes ``encode`` writes for all of them collected at once. Each part is written by ``encode`` alone; a
    later part of a family leaves out the header the format allows once per family, and only the last piece carries
    what the format writes after the last family (OpenMetrics' ``# EOF``)."""
    end = encode(_Families(()))
    yield encode(registry).removesuffix(end)
    family = None
    for source in parted:
        for part in source.parts():
            text = encode(_Families((part,))).removesuffix(end)
            if part.name == family:
                empty = Metric(part.name, part.documentation, part.type, part.unit)
                text = text.removeprefix(encode(_Families((empty,))).removesuffix(end))
            family = part.name
            yield text
    yield end


def build_router(registry: CollectorRegistry, parted: Sequence[PartedFamilies] = ()) -> APIRouter:
    """``GET /metrics``: every metric of ``registry``, then the families of ``parted``, in the format the ``Accept``
    header picks (prometheus_client's own negotiation, the one its HTTP server uses), sent part by part as written
    (:func:`exposition`)."""
    router = APIRouter(tags=["service"])

    @router.get(
        "/metrics",
        operation_id="metrics",
        summary="Hotspan's own metrics in the Prometheus text or OpenMetrics format",
        description="OpenMetrics, with trace-ID exemplars on the duration histograms' buckets, when the Accept"
        " header asks for application/openmetrics-text (as Prometheus does); else the text format 0.0.4.",
        response_class=Response,
    )
    def metrics(request: Request) -> StreamingResponse:
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return StreamingResponse(exposition(encode, registry, parted), media_type=content_type)

    return router
