"""``/api/v1/topology``: the service graph of a window, from the per-minute service-graph rollup.

Thin: parse, call the query room (:meth:`query.service.QueryService.topology`, the Topology page's graph too),
shape the answer. Every read is limited to
the caller's tenant (:mod:`api.tenancy`).
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.window import EndNs, StartNs, window
from query.service import QueryService
from units import NS_PER_MIN, NS_PER_MS


class TopologyNode(BaseModel):
    id: str = Field(description="Service name, `user`, or the name of a peer that sends no spans.")
    kind: str = Field(description="`service`, `user`, `database`, `messaging` or `virtual`.")
    calls: int = Field(description="Calls received (calls made, for a node that only calls, like `user`).")
    calls_in: int
    calls_out: int
    errors: int = Field(description="Failed calls received (client or server span with status Error).")


class TopologyEdge(BaseModel):
    source: str = Field(description="Client node.")
    target: str = Field(description="Server node.")
    connection_type: str = Field(description="`plain`, `database`, `messaging` or `virtual`.")
    calls: int
    errors: int = Field(description="Calls whose client or server span has status Error.")
    error_rate: float = Field(description="errors / calls, 0..1.")
    p50_ms: float | None = Field(description="Latency quantile as the caller saw it (client span), else the server's.")
    p95_ms: float | None
    p99_ms: float | None
    client_p50_ms: float | None = Field(description="Client span duration quantile, ms; null without client spans.")
    client_p95_ms: float | None
    client_p99_ms: float | None
    server_p50_ms: float | None = Field(description="Server span duration quantile, ms; null without server spans.")
    server_p95_ms: float | None
    server_p99_ms: float | None


class TopologyResponse(BaseModel):
    start_ns: int = Field(description="Window start as read: the start of its first minute, ns.")
    end_ns: int
    nodes: list[TopologyNode]
    edges: list[TopologyEdge]
    overflow: TopologyEdge | None = Field(
        None,
        description="The edges beyond HOTSPAN_CARDINALITY_LIMIT (the busiest are in `edges`), folded into one with "
        "empty names (otel_metric_overflow); null when every edge fits.",
    )


class EdgeExample(BaseModel):
    trace_id: str
    start_time_unix_nano: int = Field(description="Start of the call (client span, else server span), ns.")
    client_operation: str
    server_operation: str
    client_duration_ms: float | None
    server_duration_ms: float | None
    failed: bool


class EdgeExamplesResponse(BaseModel):
    source: str
    target: str
    traces: list[EdgeExample] = Field(description="Failed calls first, then the slowest; one entry per trace.")


def build_router(query: QueryService, reads: ReadPool | None = None) -> APIRouter:
    """``GET /api/v1/topology`` and ``GET /api/v1/topology/examples`` over the query room ``query`` (the graph as
    the Topology page reads it), at most ``query.cardinality_limit`` edges (the rest folded into ``overflow``). Each
    route runs whole on ``reads`` (:mod:`api.read_pool`; a pool of its own when omitted), never on the event
    loop."""
    router = APIRouter(prefix="/api/v1", tags=["topology"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get(
        "/topology",
        operation_id="get_topology",
        response_model=TopologyResponse,
        responses={400: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def topology(tenant: Tenant, start_ns: StartNs = None, end_ns: EndNs = None) -> TopologyResponse:
        """The service graph of a window (per-minute rollups, so the window starts at a whole minute): nodes
        with calls and errors, edges with calls, errors and p50/p95/p99 latency as seen by client and server.
        Times are ns; latencies ms."""
        start, end = window(start_ns, end_ns)
        graph = query.topology(start, end, tenant=tenant)
        nodes, edges = graph.nodes, graph.edges
        return TopologyResponse(
            start_ns=start - start % NS_PER_MIN,
            end_ns=end,
            nodes=[
                TopologyNode(
                    id=row["id"],
                    kind=row["kind"],
                    calls=row["calls"],
                    calls_in=row["calls_in"],
                    calls_out=row["calls_out"],
                    errors=row["errors_in"],
                )
                for row in nodes.iter_rows(named=True)
            ],
            edges=[_edge(row) for row in edges.iter_rows(named=True)],
            overflow=next((_edge(row) for row in graph.overflow.iter_rows(named=True)), None),
        )

    @router.get(
        "/topology/examples",
        operation_id="get_topology_edge_examples",
        response_model=EdgeExamplesResponse,
        responses={400: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def examples(
        tenant: Tenant,
        source: Annotated[str, Query(min_length=1, description="Client node of the edge.")],
        target: Annotated[str, Query(min_length=1, description="Server node of the edge.")],
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    ) -> EdgeExamplesResponse:
        """Traces with a call on one edge in the window (exact bounds): failed first, then the slowest."""
        start, end = window(start_ns, end_ns)
        frame = query.edge_examples(source, target, start, end, tenant=tenant, limit=limit)
        return EdgeExamplesResponse(
            source=source,
            target=target,
            traces=[
                EdgeExample(
                    trace_id=row["trace_id"],
                    start_time_unix_nano=row["start_time_unix_nano"],
                    client_operation=row["client_operation"],
                    server_operation=row["server_operation"],
                    client_duration_ms=_ms(row["client_duration_ns"]),
                    server_duration_ms=_ms(row["server_duration_ns"]),
                    failed=row["failed"],
                )
                for row in frame.iter_rows(named=True)
            ],
        )

    return router


def _edge(row: dict) -> TopologyEdge:
    client = [_ms(row[f"client_{q}_ns"]) for q in ("p50", "p95", "p99")]
    server = [_ms(row[f"server_{q}_ns"]) for q in ("p50", "p95", "p99")]
    seen = client if client[0] is not None else server
    return TopologyEdge(
        source=row["client"],
        target=row["server"],
        connection_type=row["connection_type"],
        calls=row["calls"],
        errors=row["errors"],
        error_rate=row["errors"] / row["calls"] if row["calls"] else 0.0,
        p50_ms=seen[0],
        p95_ms=seen[1],
        p99_ms=seen[2],
        client_p50_ms=client[0],
        client_p95_ms=client[1],
        client_p99_ms=client[2],
        server_p50_ms=server[0],
        server_p95_ms=server[1],
        server_p99_ms=server[2],
    )


def _ms(ns: float | None) -> float | None:
    """ns → ms, rounded to µs; None (and NaN) stay None."""
    if ns is None or math.isnan(ns):
        return None
    return round(ns / NS_PER_MS, 3)
