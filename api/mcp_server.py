"""The MCP server's tools: what Hotspan already computes (stages on the critical path, hotspots, named causes with
evidence and a remedy), for a coding agent asked "why is this slow?".

Thin, like the REST routers: parse, call the query room (:class:`query.service.QueryService`, the reads and
analyses the REST API and the UI make, through the same calls), shape a compact answer. Every read, and the answer
built from it, runs on the app's read pool (:class:`api.read_pool.ReadPool`), never on the event loop. The tenant
comes from the HTTP request carrying the tool call, as the auth middleware left it in its scope
(:mod:`hotspan.auth`; :data:`storage.tenancy.UNAUTHENTICATED` without one), never from an argument.

Units are in every argument and field name: ``_ns`` nanoseconds since the Unix epoch, ``_ms`` milliseconds,
``_minutes``, ``share`` in 0..1. ``get_trace`` and ``explain_trace`` answer text (:mod:`api.trace_text`); the other
tools JSON. A failure the caller can act on (an unknown trace, a malformed ID, a window that ends before it starts,
a read over its budget, too many reads at once) is a tool error (``isError``) whose text starts with its code, as
the REST API's error envelope names it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import polars as pl
import polars.selectors as cs
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from analysis import STAGES
from api.diagnosis import MAX_TRACES, DiagnosisResponse
from api.errors import ApiError
from api.read_pool import ReadPool
from api.trace_text import DEFAULT_MAX_SPANS, MAX_SPANS, iso, render_explanation, render_trace
from api.window import MAX_NS, check_order
from diagnosis.engine import DEFAULT_TRACE_LIMIT
from query.service import QueryService
from query.store import AnalysisFilter, IdError, StorageError, TraceQuery, normalize_trace_id, tenancy_of
from query.trace_compare import compare_traces
from query.trace_explain import DEFAULT_MARGIN_NS
from query.trace_search import TraceSearch
from query.window_compare import compare_window
from units import NS_PER_MIN, NS_PER_MS

T = TypeVar("T")

INSTRUCTIONS = (
    "Hotspan analyses traces of LLM agent stacks (OpenTelemetry, vLLM). To answer 'why is this slow?': diagnose "
    "(named causes over a window, with evidence and a remedy), then search_traces to find requests, explain_trace "
    "for one request (its stages along the critical path and the causes around it), get_trace for its span tree. "
    "top_hotspots ranks operations by self time; compare_traces and compare_window say what differs; service_map "
    "shows who calls whom. Times: *_ns are ns since the Unix epoch; durations are ms; windows default to the last "
    "60 minutes."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
MAX_ROWS = 200
"""Most rows a list in an answer holds."""

TraceId = Annotated[
    str,
    Field(description="Trace ID: 32 hex digits (any case), 16 hex (64-bit, zero-padded) or base64.", min_length=1),
]
StartNs = Annotated[
    int | None,
    Field(ge=0, le=MAX_NS, description="Window start, ns since the Unix epoch; default end_ns minus lookback_minutes."),
]
EndNs = Annotated[int | None, Field(ge=0, le=MAX_NS, description="Window end, ns since the Unix epoch; default now.")]
LookbackMinutes = Annotated[
    float, Field(gt=0, le=366 * 24 * 60, description="Window length when start_ns is absent, minutes.")
]
Service = Annotated[str | None, Field(description="Service name (exact), e.g. from search_traces or service_map.")]
Operation = Annotated[
    str | None, Field(description="Only traces with a span of this name (exact; of `service` when both are given).")
]
Limit = Annotated[int, Field(ge=1, le=MAX_ROWS, description="Most rows returned.")]
Sort = Literal["newest", "oldest", "longest", "shortest", "most_errors", "most_spans", "most_tokens"]


def build_mcp_server(query: QueryService, reads: ReadPool) -> MCPServer:
    """The MCP server over the query room ``query``, reading on ``reads``; its HTTP transport is mounted by
    :mod:`api.mcp_endpoint`."""
    server = MCPServer("hotspan", title="Hotspan", instructions=INSTRUCTIONS)

    @server.tool(name="search_traces", annotations=READ_ONLY)
    async def search_traces_tool(
        ctx: Context,
        service: Service = None,
        operation: Operation = None,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        lookback_minutes: LookbackMinutes = 60,
        min_duration_ms: Annotated[
            float | None, Field(ge=0, description="Least whole-trace duration (first span start to last end), ms.")
        ] = None,
        max_duration_ms: Annotated[float | None, Field(ge=0, description="Most whole-trace duration, ms.")] = None,
        sort: Annotated[
            Sort, Field(description="Order, ranked over every match of the window (`most_tokens`: LLM input + output).")
        ] = "newest",
        stage: Annotated[
            str | None,
            Field(
                description="Rank by the critical-path ms the trace spent in this stage, longest first; replaces "
                f"`sort`. One of {', '.join(STAGES)}. Only traces the pipeline analysed have stages."
            ),
        ] = None,
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """Find traces: a span of `service` / `operation` starting in the window, the whole trace within the
        duration bounds. Each with its root, duration (ms), spans, errors, LLM calls, tokens, cost and dominant
        stage (the stage with the most critical-path time; null until the pipeline has analysed the trace)."""
        tenant = _tenant(ctx)
        start, end = _window(start_ns, end_ns, lookback_minutes)
        search = TraceSearch(
            query=TraceQuery(service=service or None, operation=operation or None, start_ns=start, end_ns=end),
            min_trace_duration_ns=_ns(min_duration_ms),
            max_trace_duration_ns=_ns(max_duration_ms),
            sort="longest_stage" if stage else sort,
            limit=limit,
            stage=stage or "",
        )

        def answer() -> dict[str, Any]:
            traces = query.search(search, tenant=tenant).traces
            return {
                "start_ns": start,
                "end_ns": end,
                "traces": [_trace_row(row, stage) for row in traces.iter_rows(named=True)],
            }

        return await _read(reads, answer)

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def get_trace(
        ctx: Context,
        trace_id: TraceId,
        max_spans: Annotated[
            int,
            Field(ge=1, le=MAX_SPANS, description="Most spans shown; a larger trace is cut, and says what was cut."),
        ] = DEFAULT_MAX_SPANS,
    ) -> str:
        """One trace as a compact indented span tree: per span its start after the trace's start, duration and self
        time (ms), stage, whether it is on the critical path (*) or failed (!); with the stages of the root's
        critical path (ms and share) and the LLM calls' tokens, TTFT and TPOT."""
        tenant, canonical = _tenant(ctx), _trace_id(trace_id)

        def answer() -> str:
            view = query.views.load(canonical, tenant=tenant)
            if view is None:
                raise _not_found(canonical)
            return render_trace(view, max_spans)

        return await _read(reads, answer)

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def explain_trace(
        ctx: Context,
        trace_id: TraceId,
        context_minutes: Annotated[
            float,
            Field(
                gt=0,
                le=24 * 60,
                description="How far around the trace the diagnosis looks for the requests it needs, minutes.",
            ),
        ] = DEFAULT_MARGIN_NS / NS_PER_MIN,
    ) -> str:
        """Why one request was slow: its top stage and every stage along its critical path (ms and share of its
        latency), its longest critical-path sections, and the named causes the diagnosis finds among the requests
        through its root service around it, each with what it means for this request (its ms in the cause's stage),
        evidence and a remedy."""
        tenant, canonical = _tenant(ctx), _trace_id(trace_id)
        margin_ns = int(context_minutes * NS_PER_MIN)

        def answer() -> str:
            explanation = query.explain_trace(canonical, tenant=tenant, margin_ns=margin_ns)
            if explanation is None:
                raise _not_found(canonical)
            return render_explanation(explanation)

        return await _read(reads, answer)

    @server.tool(annotations=READ_ONLY)
    async def diagnose(
        ctx: Context,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        lookback_minutes: LookbackMinutes = 60,
        service: Annotated[str | None, Field(description="Only traces with a span of this service.")] = None,
        operation: Operation = None,
        max_traces: Annotated[
            int, Field(ge=1, le=MAX_TRACES, description="Most traces analysed, the most recently active first.")
        ] = DEFAULT_TRACE_LIMIT,
    ) -> dict[str, Any]:
        """Named causes of latency over a window, ranked (critical first): scheduler queue saturation, unused prefix
        cache, tokenizer cold starts, connection setup per request, decode-bound generation, orchestration CPU
        hotspots, redundant or sequential LLM calls, retrieval top-K blow-up, event-loop blocking and more. Each with
        its evidence (units in the key names), the statistical tests it rests on, example trace IDs and a remedy."""
        tenant = _tenant(ctx)
        start, end = _window(start_ns, end_ns, lookback_minutes)

        def answer() -> dict[str, Any]:
            report = query.diagnosis.diagnose(
                tenant=tenant,
                start_ns=start,
                end_ns=end,
                service=service or None,
                operation=operation or None,
                limit=max_traces,
            )
            return {"start_ns": start, "end_ns": end, **DiagnosisResponse.of(report).model_dump(mode="json")}

        return await _read(reads, answer)

    @server.tool(annotations=READ_ONLY)
    async def top_hotspots(
        ctx: Context,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        lookback_minutes: LookbackMinutes = 60,
        service: Annotated[str | None, Field(description="Only spans of this service.")] = None,
        limit: Limit = 10,
    ) -> dict[str, Any]:
        """(service, operation) pairs ranked by total self time (time in the span itself, not in its children) over
        the window's analysed spans, with p95 self time and share; and the longest spans flagged as hotspots (static
        rule, rolling p95 of their operation, or the SDK's `hotspan.hotspot=true`)."""
        tenant = _tenant(ctx)
        start, end = _window(start_ns, end_ns, lookback_minutes)
        where = AnalysisFilter(start, end, service=service or None)

        def answer() -> dict[str, Any]:
            report = query.analysis.hotspots(where, limit, tenant=tenant)
            return {
                "start_ns": start,
                "end_ns": end,
                "by_self_time": [_hotspot_row(row) for row in report.by_self_time.iter_rows(named=True)],
                "flagged_spans": [_flagged_row(row) for row in report.flagged.iter_rows(named=True)],
            }

        return await _read(reads, answer)

    @server.tool(name="compare_traces", annotations=READ_ONLY)
    async def compare_traces_tool(
        ctx: Context,
        trace_id_a: Annotated[str, Field(min_length=1, description="The baseline trace (usually the fast one).")],
        trace_id_b: Annotated[
            str, Field(min_length=1, description="The trace compared with it (usually the slow one).")
        ],
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """Two traces side by side: each stage's ms in both and the change, and the span paths (`service:operation`
        from the root down) whose summed duration changed most, including paths only one trace has."""
        tenant, a, b = _tenant(ctx), _trace_id(trace_id_a), _trace_id(trace_id_b)

        def answer() -> dict[str, Any]:
            views = [query.views.load(trace_id, tenant=tenant) for trace_id in (a, b)]
            for trace_id, view in zip((a, b), views, strict=True):
                if view is None:
                    raise _not_found(trace_id)
            result = compare_traces(*views)  # type: ignore[arg-type]
            labels = _path_labels(result.paths)
            return {
                "duration_a_ms": _ms(result.a.root_duration_ns),
                "duration_b_ms": _ms(result.b.root_duration_ns),
                "paths_only_in_a": result.only_a,
                "paths_only_in_b": result.only_b,
                "stages": [
                    {
                        "stage": r["stage"],
                        "a_ms": _ms(r["a_ns"]),
                        "b_ms": _ms(r["b_ns"]),
                        "delta_ms": _ms(r["delta_ns"]),
                    }
                    for r in result.stages.sort("delta_ns", descending=True).iter_rows(named=True)
                ],
                "paths": [
                    {
                        "path": labels[r["node"]],
                        "spans_a": r["count_a"],
                        "spans_b": r["count_b"],
                        "duration_a_ms": _ms(r["duration_a_ns"]),
                        "duration_b_ms": _ms(r["duration_b_ns"]),
                        "delta_ms": _ms(r["delta_ns"]),
                    }
                    for r in result.paths.head(limit).iter_rows(named=True)
                ],
            }

        return await _read(reads, answer)

    @server.tool(name="compare_window", annotations=READ_ONLY)
    async def compare_window_tool(
        ctx: Context,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        lookback_minutes: LookbackMinutes = 60,
        service: Annotated[str | None, Field(description="Only requests whose root is this service.")] = None,
        quantile: Annotated[
            float, Field(gt=0, lt=1, description="Requests at or above this quantile of duration are the slow ones.")
        ] = 0.9,
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """A window's slow requests against the rest (like TraceQL's compare()): which stages grew (mean ms per
        request in each group) and which attribute values (root service and operation, model, request tenant, error,
        calls a model) the slow requests carry more often. Covers the requests the pipeline has analysed."""
        tenant = _tenant(ctx)
        start, end = _window(start_ns, end_ns, lookback_minutes)
        where = AnalysisFilter(start, end, service=service or None)

        def answer() -> dict[str, Any]:
            result = compare_window(query.analysis, where, tenant=tenant, quantile=quantile)
            if result is None:
                return {"start_ns": start, "end_ns": end, "comparison": None, "why": "fewer than two analysed requests"}
            return {
                "start_ns": start,
                "end_ns": end,
                "threshold_ms": _ms(result.threshold_ns),
                "slow_requests": result.slow,
                "baseline_requests": result.baseline,
                "stages": [
                    {
                        "stage": r["stage"],
                        "slow_mean_ms": _ms(r["slow_mean_ns"]),
                        "baseline_mean_ms": _ms(r["baseline_mean_ns"]),
                        "delta_ms": _ms(r["delta_ns"]),
                    }
                    for r in result.stages.iter_rows(named=True)
                ],
                "attributes": _rounded(result.attributes.head(limit)),
            }

        return await _read(reads, answer)

    @server.tool(annotations=READ_ONLY)
    async def service_map(
        ctx: Context, start_ns: StartNs = None, end_ns: EndNs = None, lookback_minutes: LookbackMinutes = 60
    ) -> dict[str, Any]:
        """Who calls whom over the window (per-minute rollups the pipeline writes): services with calls and errors
        received, and edges with calls, error rate and p50/p95 latency as the caller saw it (ms)."""
        tenant = _tenant(ctx)
        start, end = _window(start_ns, end_ns, lookback_minutes)

        def answer() -> dict[str, Any]:
            graph = query.topology(start, end, tenant=tenant)
            return {
                "start_ns": start,
                "end_ns": end,
                "services": [
                    {
                        "name": r["id"],
                        "kind": r["kind"],
                        "calls_in": r["calls_in"],
                        "calls_out": r["calls_out"],
                        "errors_in": r["errors_in"],
                    }
                    for r in graph.nodes.iter_rows(named=True)
                ],
                "edges": [_edge_row(row) for row in graph.edges.iter_rows(named=True)],
                "edges_folded": graph.overflow.height > 0,
            }

        return await _read(reads, answer)

    return server


async def _read(reads: ReadPool, answer: Callable[[], T]) -> T:
    """``answer()`` on the read pool; its API and storage failures as tool errors naming their code."""
    try:
        return await reads.run(answer)
    except ApiError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except StorageError as exc:
        raise ToolError(f"storage_error: {exc}") from exc
    except ValueError as exc:
        raise ToolError(f"invalid_parameter: {exc}") from exc


def _tenant(ctx: Context) -> str | None:
    """The reading tenant of the HTTP request carrying the tool call (module docstring)."""
    request = ctx.request_context.request
    return tenancy_of(getattr(request, "scope", {})).read_tenant


def _trace_id(text: str) -> str:
    try:
        return normalize_trace_id(text)
    except IdError as exc:
        raise ToolError(f"invalid_trace_id: {exc}") from exc


def _not_found(trace_id: str) -> ToolError:
    return ToolError(f"not_found: trace {trace_id} not found")


def _window(start_ns: int | None, end_ns: int | None, lookback_minutes: float) -> tuple[int, int]:
    """``(start_ns, end_ns)`` with the defaults filled: now, and ``lookback_minutes`` before the end."""
    end = end_ns if end_ns is not None else time.time_ns()
    start = start_ns if start_ns is not None else max(0, end - int(lookback_minutes * NS_PER_MIN))
    try:
        check_order(start, end)
    except ApiError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    return start, end


def _ns(duration_ms: float | None) -> int | None:
    return None if duration_ms is None else int(duration_ms * NS_PER_MS)


def _ms(ns: float | None) -> float | None:
    """ns → ms rounded to the µs; None and NaN (a quantile of nothing) are None."""
    return None if ns is None or math.isnan(ns) else round(ns / NS_PER_MS, 3)


def _trace_row(row: dict[str, Any], stage: str | None) -> dict[str, Any]:
    answer = {
        "trace_id": row["trace_id"],
        "start": iso(row["start_time_unix_nano"]),
        "start_ns": row["start_time_unix_nano"],
        "root": f"{row['root_service']}: {row['root_name']}",
        "duration_ms": _ms(row["duration_ns"]),
        "span_count": row["span_count"],
        "error_count": row["error_count"],
        "llm_calls": row["llm_calls"],
        "input_tokens": row["input_tokens"],
        "output_tokens": row["output_tokens"],
        "cost": row["cost"],
        "currency": row["currency"],
        "dominant_stage": row["dominant_stage"],
    }
    if stage:
        answer["stage_ms"] = _ms(row["stage_ns"])
    return answer


def _hotspot_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "service": row["service_name"],
        "operation": row["name"],
        "spans": row["spans"],
        "self_total_ms": _ms(row["self_total_ns"]),
        "self_p95_ms": _ms(row["self_p95_ns"]),
        "self_share": None if row["self_share"] is None else round(row["self_share"], 4),
        "hotspot_spans": row["hotspot_spans"],
    }


def _flagged_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "trace_id": row["trace_id"],
        "span_id": row["span_id"],
        "span": f"{row['service_name']}: {row['name']}",
        "stage": row["stage"],
        "duration_ms": _ms(row["duration_ns"]),
        "self_ms": _ms(row["self_time_ns"]),
        "reason": row["reason"],
        "threshold_ms": row["threshold_ms"],
    }


def _edge_row(row: dict[str, Any]) -> dict[str, Any]:
    # As the REST API's edge (api.topology): the caller's view where client spans exist, else the server's.
    side = "client" if _ms(row["client_p50_ns"]) is not None else "server"
    return {
        "caller": row["client"],
        "callee": row["server"],
        "connection": row["connection_type"],
        "calls": row["calls"],
        "error_rate": round(row["errors"] / row["calls"], 4) if row["calls"] else 0.0,
        "p50_ms": _ms(row[f"{side}_p50_ns"]),
        "p95_ms": _ms(row[f"{side}_p95_ns"]),
        "latency_seen_by": side,
    }


def _path_labels(paths: pl.DataFrame) -> dict[str, str]:
    """Per path node of a trace comparison, its labels from the root down (``a > b > c``)."""
    parents = dict(zip(paths["node"], paths["parent"], strict=True))
    label = dict(zip(paths["node"], paths["label"], strict=True))
    labels: dict[str, str] = {}
    for node in paths["node"]:
        chain, step = [], node
        while step:
            chain.append(label[step])
            step = parents[step]
        labels[node] = " > ".join(reversed(chain))
    return labels


def _rounded(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return frame.with_columns(cs.float().round(4)).to_dicts()
