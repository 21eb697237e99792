"""The analysis REST API over a served Hotspan whose own trace pipeline analysed what it received: the
OpenTelemetry demo capture (otel-tui test data) and two hand-built vLLM agent requests with known stages.

The two vLLM requests (``tests/pipeline/pipeline_support.vllm_agent_trace``; ms):

====  =======  =====  =======  ======  ======  =========  ====  ====
ID    tenant   queue  prefill  decode  tokens  e2e        TTFT  TPOT
====  =======  =====  =======  ======  ======  =========  ====  ====
A     acme     100    200      500     101     1000       300   5
B     globex   300    200      500     101     1200       500   5
====  =======  =====  =======  ======  ======  =========  ====  ====

Along each critical path: gateway 20, agent 60, retrieval 100, network 20, then queue, prefill, decode (e2e =
queue + prefill + decode + 200). TPOT = decode / (tokens - 1) = 500 ms / 100.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import polars as pl
import pytest
from cluster_kit import layout_settings
from pipeline.pipeline_support import MS, T0, otlp_request, vllm_agent_trace

from analysis import STAGES, analyze, data_quality
from analysis.spans import ATTRIBUTES
from hotspan.server import RunningServer, start_server
from hotspan.settings import Settings, load_settings
from storage.reader import ClickHouseTraceReader
from storage.tenancy import DEFAULT_TENANT
from testkit import TRACES

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
A, B = "a1" * 16, "b2" * 16
HOUR_NS = 3_600 * 1_000_000_000
WINDOW = {"start_ns": T0, "end_ns": T0 + HOUR_NS}


@pytest.fixture(scope="module")
def server(chdb_dsn: str, layout: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One served Hotspan for the module (a server costs seconds) on each layout; its pipeline analyses traces
    0.2 s after their last span, and the fixture waits until every received trace is analysed."""
    with layout_settings(chdb_dsn, layout, "a") as where:
        settings = load_settings(
            data_dir=tmp_path_factory.mktemp("analysis_api"),
            clickhouse_dsn=chdb_dsn,
            http_port=0,
            grpc_port=-1,
            trace_idle_s=0.2,
            **where,
        )
        yield from _served(settings)


def _served(settings: Settings) -> Iterator[RunningServer]:
    running = start_server(settings)
    # The capture's 41 requests sent as 3 (each POST costs a durable spool write); traces spanning two of them
    # arrive in parts, as they do from real exporters.
    lines = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
    bodies = [{"resourceSpans": [rs for line in lines[i::3] for rs in line["resourceSpans"]]} for i in range(3)]
    bodies += [otlp_request(A, _vllm("acme", 100)), otlp_request(B, _vllm("globex", 300), T0 + 60_000 * MS)]
    for body in map(json.dumps, bodies):
        answer = httpx.post(
            f"{running.base_url}/v1/traces", content=body, headers={"content-type": "application/json"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
    _wait_until_analysed(running, 143)
    yield running
    running.stop()


def _vllm(tenant: str, queue_ms: int) -> list:
    return vllm_agent_trace(queue_ms=queue_ms, prefill_ms=200, decode_ms=500, completion_tokens=101, tenant=tenant)


def _wait_until_analysed(running: RunningServer, traces: int) -> None:
    ch = running.storage.clickhouse
    deadline = time.monotonic() + 60
    query = (
        "SELECT count(), countIf(s.AnalysedSpans = a.Spans) FROM hotspan_trace_summary AS s FINAL "
        "JOIN (SELECT TraceId, sum(Spans) AS Spans FROM hotspan_trace_arrivals GROUP BY TraceId) AS a USING TraceId"
    )
    while time.monotonic() < deadline:
        if ch.query_rows(query) == [(traces, traces)]:
            return
        time.sleep(0.2)
    raise AssertionError(f"the trace pipeline did not analyse {traces} traces in time: {ch.query_rows(query)}")


def _get(server: RunningServer, path: str, **params: object) -> httpx.Response:
    return httpx.get(f"{server.base_url}{path}", params=params, timeout=30)


def _ok(server: RunningServer, path: str, **params: object) -> dict:
    answer = _get(server, path, **params)
    assert answer.status_code == 200, answer.text
    return answer.json()


# --- per trace ---------------------------------------------------------------------------------------------


@pytest.mark.both_layouts
def test_trace_stages_of_a_vllm_agent_request(server: RunningServer) -> None:
    body = _ok(server, f"/api/v1/traces/{A.upper()}/stages")
    expected = dict.fromkeys(STAGES, 0) | {
        "gateway": 20 * MS,
        "agent": 60 * MS,
        "retrieval": 100 * MS,
        "llm.call": 20 * MS,  # the chat client span's own time around llm_request
        "llm.queue": 100 * MS,
        "llm.prefill": 200 * MS,
        "llm.decode": 500 * MS,
    }
    assert body["trace_id"] == A and body["root_span_id"] == "0000000000000001"
    assert body["total_ns"] == 1000 * MS and body["stages_ns"] == expected
    assert sum(body["stages_ns"].values()) == body["total_ns"]
    assert (body["ttft_ns"], body["tpot_ns"]) == (300 * MS, 5 * MS)
    # Nothing runs in parallel here, so the wall-clock view agrees to the ns.
    assert body["wall_clock_stages_ns"] == expected and body["disagreements"] == []
    # A whole trace with its root: nothing to say of the window's quality.
    assert body["data_quality"] == []


def test_trace_critical_path_sections(server: RunningServer) -> None:
    body = _ok(server, f"/api/v1/traces/{A}/critical-path")
    sections = [(s["name"], s["stage"], (s["start_ns"] - T0) // MS, (s["end_ns"] - T0) // MS) for s in body["sections"]]
    assert sections == [
        ("POST /chat", "gateway", 0, 10),
        ("invoke_agent", "agent", 10, 20),
        ("vector search", "retrieval", 20, 120),
        ("invoke_agent", "agent", 120, 130),
        ("chat llama-3-8b", "llm.call", 130, 140),
        ("llm_request", "llm.queue", 140, 240),
        ("llm_request", "llm.prefill", 240, 440),
        ("llm_request", "llm.decode", 440, 940),
        ("chat llama-3-8b", "llm.call", 940, 950),
        ("invoke_agent", "agent", 950, 990),
        ("POST /chat", "gateway", 990, 1000),
    ]
    assert body["total_ns"] == 1000 * MS == sum(s["duration_ns"] for s in body["sections"])


def test_trace_statistics_like_jaeger_ui(server: RunningServer) -> None:
    rows = _ok(server, f"/api/v1/traces/{A}/statistics")["rows"]
    # Self time: llm_request 800, vector search 100, invoke_agent 980 - 100 - 820 = 60, chat 820 - 800 = 20,
    # POST /chat 1000 - 980 = 20; percent of the 1000 ms trace.
    assert [(r["service_name"], r["name"], r["count"], r["self_total_ms"], r["percent"]) for r in rows] == [
        ("vllm", "llm_request", 1, 800.0, 80.0),
        ("agent", "vector search", 1, 100.0, 10.0),
        ("agent", "invoke_agent", 1, 60.0, 6.0),
        ("agent", "chat llama-3-8b", 1, 20.0, 2.0),
        ("gateway", "POST /chat", 1, 20.0, 2.0),
    ]
    by_service = _ok(server, f"/api/v1/traces/{A}/statistics", group_by="service")["rows"]
    assert [(r["service_name"], r["name"], r["count"], r["total_ms"], r["self_total_ms"]) for r in by_service] == [
        ("vllm", None, 1, 800.0, 800.0),
        ("agent", None, 3, 980.0 + 100.0 + 820.0, 180.0),
        ("gateway", None, 1, 1000.0, 20.0),
    ]


def test_trace_flamegraph(server: RunningServer) -> None:
    nodes = _ok(server, f"/api/v1/traces/{A}/flamegraph")["nodes"]
    assert [(n["label"], n["depth"], n["self_ns"] // MS, n["total_ns"] // MS, n["count"]) for n in nodes] == [
        (A, 0, 0, 1000, 1),
        ("gateway:POST /chat", 1, 20, 1000, 1),
        ("agent:invoke_agent", 2, 60, 980, 1),
        ("agent:chat llama-3-8b", 3, 20, 820, 1),
        ("agent:vector search", 3, 100, 100, 1),
        ("vllm:llm_request", 4, 800, 800, 1),
    ]
    ids = {n["label"]: n["id"] for n in nodes}
    assert next(n["parent"] for n in nodes if n["label"] == "vllm:llm_request") == ids["agent:chat llama-3-8b"]


def test_per_trace_endpoints_on_every_real_trace_sum_to_the_root(server: RunningServer) -> None:
    for trace_id in _demo_trace_ids()[:8]:
        stages = _ok(server, f"/api/v1/traces/{trace_id}/stages")
        assert sum(stages["stages_ns"].values()) == stages["total_ns"]
        path = _ok(server, f"/api/v1/traces/{trace_id}/critical-path")
        assert path["total_ns"] == stages["total_ns"]
        flame = _ok(server, f"/api/v1/traces/{trace_id}/flamegraph")["nodes"]
        assert flame[0]["total_ns"] == sum(n["self_ns"] for n in flame)


# --- over a window -----------------------------------------------------------------------------------------


@pytest.mark.both_layouts
def test_stage_percentiles_by_model_hand_checked(server: RunningServer) -> None:
    body = _ok(server, "/api/v1/stages", group_by="model", **WINDOW)
    assert [g["group"] for g in body["groups"]] == ["llama-3-8b"]
    group = body["groups"][0]
    # Two requests: linear interpolation between them, as numpy's default (p95 = lo + 0.95 × (hi - lo)).
    assert group["requests"] == 2
    assert group["e2e"] == {
        "requests": 2,
        "p50_ns": 1100 * MS,
        "p95_ns": 1190 * MS,
        "p99_ns": 1198 * MS,
        "mean_ns": 1100 * MS,
    }
    assert group["ttft"] == {
        "requests": 2,
        "p50_ns": 400 * MS,
        "p95_ns": 490 * MS,
        "p99_ns": 498 * MS,
        "mean_ns": 400 * MS,
    }
    assert group["tpot"]["p50_ns"] == pytest.approx(5 * MS)
    stages = {s["stage"]: s for s in group["stages"]}
    assert list(stages) == list(STAGES)
    assert stages["llm.queue"] == {
        "stage": "llm.queue",
        "p50_ns": 200 * MS,
        "p95_ns": 290 * MS,
        "p99_ns": 298 * MS,
        "mean_ns": 200 * MS,
        "share_of_e2e": pytest.approx(400 / 2200),
    }
    assert stages["gateway"]["share_of_e2e"] == pytest.approx(40 / 2200)
    assert stages["tool"]["p99_ns"] == 0 and stages["tool"]["share_of_e2e"] == 0
    assert sum(s["share_of_e2e"] for s in group["stages"]) == pytest.approx(1.0)


def test_stage_groups_and_filters(server: RunningServer) -> None:
    by_tenant = _ok(server, "/api/v1/stages", group_by="tenant", **WINDOW)["groups"]
    assert {g["group"]: g["e2e"]["p50_ns"] for g in by_tenant} == {"acme": 1000 * MS, "globex": 1200 * MS}
    acme = _ok(server, "/api/v1/stages", tenant="acme", **WINDOW)["groups"]
    assert [(g["group"], g["requests"]) for g in acme] == [("", 1)]
    queue = next(s for s in acme[0]["stages"] if s["stage"] == "llm.queue")
    assert queue["share_of_e2e"] == pytest.approx(0.1)
    assert _ok(server, "/api/v1/stages", service="gateway", **WINDOW)["groups"][0]["requests"] == 2
    assert _ok(server, "/api/v1/stages", service="agent", **WINDOW)["groups"] == []
    by_service = _ok(server, "/api/v1/stages", group_by="service", start_ns=0, end_ns=T0 + HOUR_NS)["groups"]
    demo_roots = {g["group"] for g in by_service} - {"gateway"}
    assert demo_roots and sum(g["requests"] for g in by_service) == 143


def test_stage_data_quality_counts_the_repaired_windows_of_real_traces(server: RunningServer) -> None:
    # The demo capture holds broken shapes of its own: a trace without its root, roots far longer than their spans,
    # work that outlives the span that started it. Counted from the stored summaries, as the analysis of the spans
    # read back says, request by request.
    start, end = _demo_window()
    (group,) = _ok(server, "/api/v1/stages", start_ns=start, end_ns=end)["groups"]
    reader = ClickHouseTraceReader(server.storage.clickhouse)
    spans = pl.concat([reader.trace(trace_id, tenant=DEFAULT_TENANT) for trace_id in _demo_trace_ids()])
    quality = data_quality(spans)
    expected = {
        "enveloped": quality["envelope"].sum(),
        "attached": (quality["parentless_spans"] > 1).sum(),
        "outliving": (quality["extended_spans"] > 0).sum(),
        "implausible_root": quality["implausible_root"].sum(),
        "reattached": (quality["reattached_spans"] > 0).sum(),
        "unrecorded": 0,
    }
    assert group["data_quality"] == expected
    assert expected["enveloped"] and expected["outliving"] and expected["implausible_root"]


def test_stage_shares_over_time(server: RunningServer) -> None:
    body = _ok(server, "/api/v1/stages/timeseries", bucket_s=60, **WINDOW)
    buckets = sorted({p["bucket_start_ns"] for p in body["points"]})
    # T0 is 40 s past a whole minute: A's bucket starts 40 s before it, B's (T0 + 60 s) 20 s after it.
    assert buckets == [T0 - 40_000 * MS, T0 + 20_000 * MS]
    queue = {p["bucket_start_ns"]: p for p in body["points"] if p["stage"] == "llm.queue"}
    assert queue[buckets[0]]["share_of_e2e"] == pytest.approx(0.1)
    assert queue[buckets[1]]["share_of_e2e"] == pytest.approx(300 / 1200)
    assert (queue[buckets[1]]["stage_ns"], queue[buckets[1]]["e2e_ns"]) == (300 * MS, 1200 * MS)
    too_many = _get(server, "/api/v1/stages/timeseries", bucket_s=1, start_ns=0, end_ns=T0)
    assert too_many.status_code == 400 and too_many.json()["error"]["code"] == "invalid_parameter"


@pytest.mark.both_layouts
def test_hotspot_ranking_on_real_traces_matches_an_independent_count(server: RunningServer) -> None:
    start, end = _demo_window()
    body = _ok(server, "/api/v1/hotspots", start_ns=start, end_ns=end, limit=1000)
    expected = _demo_self_times().group_by("service_name", "name").agg(pl.col("self_time_ns").sum())
    expected_totals = {(r["service_name"], r["name"]): r["self_time_ns"] for r in expected.iter_rows(named=True)}
    ranked = {(r["service_name"], r["name"]): r["self_total_ns"] for r in body["by_self_time"]}
    assert ranked == expected_totals
    totals = [r["self_total_ns"] for r in body["by_self_time"]]
    assert totals == sorted(totals, reverse=True)
    assert sum(r["self_share"] for r in body["by_self_time"]) == pytest.approx(1.0)
    p95 = [r["self_p95_ns"] for r in body["by_p95_self_time"]]
    assert p95 == sorted(p95, reverse=True)
    top = _ok(server, "/api/v1/hotspots", start_ns=start, end_ns=end, limit=3, service="frontend")
    assert len(top["by_self_time"]) <= 3 and {r["service_name"] for r in top["by_self_time"]} == {"frontend"}
    assert all(span["reason"] in ("static", "p95", "sdk") for span in body["flagged_spans"])


def test_aggregated_flamegraph(server: RunningServer) -> None:
    body = _ok(server, "/api/v1/flamegraph", **WINDOW)
    labels = {n["label"]: n for n in body["nodes"]}
    assert body["traces"] == 2 and body["nodes"][0]["label"] == "all traces"
    assert labels["gateway:POST /chat"]["total_ns"] == 2200 * MS == body["nodes"][0]["total_ns"]
    assert (labels["vllm:llm_request"]["self_ns"], labels["vllm:llm_request"]["count"]) == (1800 * MS, 2)
    acme = _ok(server, "/api/v1/flamegraph", tenant="acme", **WINDOW)
    assert (acme["traces"], acme["nodes"][0]["total_ns"]) == (1, 1000 * MS)
    vllm = _ok(server, "/api/v1/flamegraph", service="vllm", operation="llm_request", **WINDOW)
    assert vllm["traces"] == 2
    none = _ok(server, "/api/v1/flamegraph", service="vllm", operation="nope", **WINDOW)
    assert (none["traces"], [n["id"] for n in none["nodes"]]) == (0, ["root"])
    # On the real capture, the root weighs all the self time of every span of the window's requests.
    start, end = _demo_window()
    demo = _ok(server, "/api/v1/flamegraph", start_ns=start, end_ns=end)
    assert demo["traces"] == 141
    assert demo["nodes"][0]["total_ns"] == _demo_self_times()["self_time_ns"].sum()


# --- errors, hostile input, documentation -------------------------------------------------------------------


def test_errors_answer_in_the_envelope(server: RunningServer) -> None:
    for suffix in ("stages", "critical-path", "statistics", "flamegraph"):
        missing = _get(server, f"/api/v1/traces/{'0123456789abcdef' * 2}/{suffix}")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        bad = _get(server, f"/api/v1/traces/xyz/{suffix}")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_trace_id"
    for path, params in (
        ("/api/v1/stages", {"start_ns": 2, "end_ns": 1}),
        ("/api/v1/stages", {"group_by": "planet"}),
        ("/api/v1/hotspots", {"limit": 0}),
        ("/api/v1/flamegraph", {"start_ns": -1}),
        (f"/api/v1/traces/{A}/statistics", {"group_by": "planet"}),
    ):
        answer = _get(server, path, **params)
        assert answer.status_code == 400, (path, params)
        assert set(answer.json()["error"]) == {"code", "message"}


@pytest.mark.parametrize("hostile", ["' OR 1=1 --", "x'); DROP TABLE hotspan_trace_summary; --", "{service:String}"])
def test_hostile_parameters_stay_parameters(server: RunningServer, hostile: str) -> None:
    for path in ("/api/v1/stages", "/api/v1/hotspots", "/api/v1/flamegraph", "/api/v1/stages/timeseries"):
        for name in ("service", "tenant"):
            assert _get(server, path, **{name: hostile}, **WINDOW).status_code == 200
    assert _ok(server, "/api/v1/stages", service=hostile, **WINDOW)["groups"] == []
    assert _ok(server, "/api/v1/flamegraph", operation=hostile, **WINDOW)["traces"] == 0
    assert _ok(server, "/api/v1/hotspots", service=hostile, **WINDOW)["by_self_time"] == []
    assert _ok(server, "/api/v1/stages", **WINDOW)["groups"][0]["requests"] == 2


def test_openapi_documents_units_and_errors(server: RunningServer) -> None:
    spec = _ok(server, "/openapi.json")
    operations = {
        "/api/v1/traces/{trace_id}/critical-path": "get_trace_critical_path",
        "/api/v1/traces/{trace_id}/statistics": "get_trace_statistics",
        "/api/v1/traces/{trace_id}/flamegraph": "get_trace_flamegraph",
        "/api/v1/traces/{trace_id}/stages": "get_trace_stages",
        "/api/v1/stages": "get_stages",
        "/api/v1/stages/timeseries": "get_stage_shares_over_time",
        "/api/v1/hotspots": "get_hotspots",
        "/api/v1/flamegraph": "get_flamegraph",
    }
    for path, operation_id in operations.items():
        get = spec["paths"][path]["get"]
        assert get["operationId"] == operation_id and get["description"]
        assert "400" in get["responses"]
        assert ("404" in get["responses"]) == ("{trace_id}" in path)
    schema = spec["components"]["schemas"]["TraceStagesResponse"]["properties"]
    assert {"total_ns", "stages_ns", "ttft_ns", "tpot_ns", "wall_clock_stages_ns"} <= set(schema)


# --- the real capture, independently -------------------------------------------------------------------------


def _demo_frame() -> pl.DataFrame:
    rows = []
    for line in DEMO.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            attributes = {a["key"]: a["value"].get("stringValue", "") for a in resource["resource"]["attributes"]}
            for scope in resource["scopeSpans"]:
                rows += [
                    {
                        "trace_id": s["traceId"],
                        "span_id": s["spanId"],
                        "parent_span_id": s.get("parentSpanId", ""),
                        "name": s["name"],
                        "service_name": attributes["service.name"],
                        "kind": OTLP_KINDS[s.get("kind", 0)],
                        "start_time_unix_nano": int(s["startTimeUnixNano"]),
                        "end_time_unix_nano": int(s["endTimeUnixNano"]),
                        "attributes": [{"key": "", "value": ""}],
                        # The hosts the resources name: the skew adjuster reads them (analysis.remote_spans).
                        "resource_attributes": attributes,
                    }
                    for s in scope["spans"]
                ]
    frame = pl.DataFrame([{k: v for k, v in row.items() if k != "resource_attributes"} for row in rows])
    return frame.with_columns(
        pl.Series("resource_attributes", [row["resource_attributes"] for row in rows], ATTRIBUTES)
    )


OTLP_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
"""OTLP's SpanKind enum by number: the analysis reads kinds (a childless INTERNAL span may be a wrapper)."""


def _demo_trace_ids() -> list[str]:
    return sorted(_demo_frame()["trace_id"].unique())


def _demo_window() -> tuple[int, int]:
    frame = _demo_frame()
    return int(frame["start_time_unix_nano"].min()) - 1, int(frame["end_time_unix_nano"].max())


def _demo_self_times() -> pl.DataFrame:
    analysis = analyze(_demo_frame())
    return analysis.tree.spans.select("service_name", "name").with_columns(
        pl.Series("self_time_ns", analysis.self_time_ns)
    )
