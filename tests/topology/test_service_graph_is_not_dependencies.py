"""The topology page's per-minute service-graph rollup is not Jaeger's dependencies (issue 34), on served ingest.

Issue 34 asked whether ``/api/dependencies`` (raw spans: every parent→child span pair across services, counted at
the child's start) could read ``hotspan_service_graph_minutes`` instead (the trace pipeline's client→server calls,
counted at the client's start, once per trace at its first analysis). Each test sends OTLP/HTTP to a served
Hotspan and reads both answers through their routes: they agree on a plain client→server call and on re-sent
spans (neither counts a re-sent span twice), and part on every other case here, so the rollup cannot answer the
dependencies as it is (benchmarks/README.md, "Dependencies after issue 34").
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from hotspan.server import RunningServer
from testkit import serve_in_process
from units import NS_PER_MS, NS_PER_S

MINUTE_NS = 60 * NS_PER_S
SERVER, CLIENT, INTERNAL = 2, 3, 1
"""OTLP span kinds."""
HTTP_TIMEOUT_S = 30.0
"""httpx's default 5 s read timeout was passed by one topology read (0.2 s here) in a CI run on a loaded host."""

Edges = dict[tuple[str, str], int]
"""(caller service, called service) → calls."""


def _span(trace: int, span: int, parent: int, kind: int, start_ns: int) -> dict[str, object]:
    """One OTLP-JSON span of 10 ms starting at ``start_ns`` (ns since the epoch); ``parent`` 0 for a root."""
    return {
        "traceId": f"{trace:032x}",
        "spanId": f"{span:016x}",
        "parentSpanId": f"{parent:016x}" if parent else "",
        "name": f"op {span}",
        "kind": kind,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 10 * NS_PER_MS),
    }


def _post(server: RunningServer, service: str, *spans: dict[str, object]) -> None:
    """POST ``spans`` of ``service`` as one OTLP/JSON request, asserting it is accepted."""
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": list(spans)}]}]}
    answer = httpx.post(f"{server.base_url}/v1/traces", json=body, timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 200, answer.text


def _analyse(server: RunningServer) -> None:
    """Store what was sent and analyse every trace now (the service graph is written by the trace pipeline)."""
    assert server.pipeline is not None and server.pipeline.flush(60)
    assert server.trace_pipeline is not None
    server.trace_pipeline.run_once(force=True)


def _dependencies(server: RunningServer, start_ns: int, end_ns: int) -> Edges:
    """Jaeger's ``/api/dependencies`` over ``[start_ns, end_ns]`` (whole ms)."""
    end_ms, start_ms = end_ns // NS_PER_MS, start_ns // NS_PER_MS
    answer = httpx.get(
        f"{server.base_url}/api/dependencies",
        params={"endTs": end_ms, "lookback": end_ms - start_ms},
        timeout=HTTP_TIMEOUT_S,
    )
    return {(link["parent"], link["child"]): link["callCount"] for link in answer.json()["data"]}


def _service_graph(server: RunningServer, start_ns: int, end_ns: int) -> Edges:
    """The topology route's calls between two services that sent spans (no virtual peer, no "user")."""
    answer = httpx.get(
        f"{server.base_url}/api/v1/topology", params={"start_ns": start_ns, "end_ns": end_ns}, timeout=HTTP_TIMEOUT_S
    )
    edges = answer.json()["edges"]
    return {(e["source"], e["target"]): e["calls"] for e in edges if e["connection_type"] in ("plain", "messaging")}


def _a_call(server: RunningServer, trace: int, caller: str, callee: str, start_ns: int) -> None:
    """A request into ``caller`` (root server span) whose client span calls ``callee`` (server span)."""
    _post(server, caller, _span(trace, 1, 0, SERVER, start_ns), _span(trace, 2, 1, CLIENT, start_ns + NS_PER_MS))
    _post(server, callee, _span(trace, 3, 2, SERVER, start_ns + 2 * NS_PER_MS))


def test_the_service_graph_misses_calls_the_dependencies_count(hotspan_server: RunningServer) -> None:
    server = hotspan_server
    base = (time.time_ns() // MINUTE_NS - 10) * MINUTE_NS
    _a_call(server, 1, "front", "back", base + NS_PER_S)
    # A call without client/server kinds: a server span's child in another service is an internal span.
    _post(server, "front", _span(2, 1, 0, SERVER, base + 2 * NS_PER_S))
    _post(server, "worker", _span(2, 2, 1, INTERNAL, base + 2 * NS_PER_S))
    # The called side's span arrives after the trace was analysed (a second batch from a slower exporter).
    _post(server, "front", _span(3, 1, 0, SERVER, base + 3 * NS_PER_S), _span(3, 2, 1, CLIENT, base + 3 * NS_PER_S))
    _analyse(server)
    _post(server, "late", _span(3, 3, 2, SERVER, base + 3 * NS_PER_S + NS_PER_MS))
    # The same batches sent again, before and after the trace's analysis.
    _a_call(server, 4, "front", "resent", base + 4 * NS_PER_S)
    _a_call(server, 4, "front", "resent", base + 4 * NS_PER_S)
    _analyse(server)
    _a_call(server, 4, "front", "resent", base + 4 * NS_PER_S)
    # A call across a minute's end: the client span in one minute, the server span it calls in the next.
    boundary = base + 3 * MINUTE_NS
    _post(server, "edge", _span(5, 1, 0, SERVER, boundary - 300 * NS_PER_MS))
    _post(server, "edge", _span(5, 2, 1, CLIENT, boundary - 100 * NS_PER_MS))
    _post(server, "edgeb", _span(5, 3, 2, SERVER, boundary + 100 * NS_PER_MS))
    _analyse(server)

    window = (base, base + 5 * MINUTE_NS)
    assert _dependencies(server, *window) == {
        ("edge", "edgeb"): 1,
        ("front", "back"): 1,
        ("front", "late"): 1,
        ("front", "resent"): 1,
        ("front", "worker"): 1,
    }
    assert _service_graph(server, *window) == {("edge", "edgeb"): 1, ("front", "back"): 1, ("front", "resent"): 1}
    before_boundary = (base, boundary - NS_PER_MS)
    assert ("edge", "edgeb") not in _dependencies(server, *before_boundary), "counted at the called span's start"
    assert _service_graph(server, *before_boundary)[("edge", "edgeb")] == 1, "counted at the client span's minute"


def test_a_tail_sampled_out_trace_stays_in_the_service_graph_only(chdb_dsn: str, tmp_path: Path) -> None:
    policies = tmp_path / "sampling.yaml"
    policies.write_text("policies:\n  - {name: errors, type: status_code, status_code: {status_codes: [ERROR]}}\n")
    server = serve_in_process(chdb_dsn, tmp_path, "g", tail_sampling_path=policies)
    try:
        base = (time.time_ns() // MINUTE_NS - 10) * MINUTE_NS
        _a_call(server, 6, "front", "back", base + NS_PER_S)
        _analyse(server)
        window = (base, base + MINUTE_NS)
        assert server.storage.clickhouse.query_rows("SELECT count() FROM otel_traces")[0][0] == 0, "spans deleted"
        assert _dependencies(server, *window) == {}
        assert _service_graph(server, *window) == {("front", "back"): 1}
    finally:
        server.stop()
