"""``hotspan import`` on every shared trace file: counts as ../shared/data/SOURCES.md gives them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from hotspan.importer import ImportSummary, OtlpHttpSink, StoreSink, import_paths
from hotspan.server import RunningServer
from storage.clickhouse import ClickHouse
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES

# (spans, traces, services) per file, from SOURCES.md unless a comment says why not.
EXPECTED = {
    "otlp/jaeger__otel_traces_01.json": (4, 2, 1),
    # The file holds one span twice, equal in every field (telemetrygen output); the collector stores a span sent
    # twice once and reports the other copy as a duplicate (issue 7), so 1 span where a plain parse counts 2.
    "otlp/jaeger__query_otlp2jaeger-in.json": (1, 1, 1),
    "otlp/jaegerui__otlp2jaeger-multi-in-combined.json": (4, 1, 1),
    "otlp/otelproto__trace.json": (1, 1, 1),
    "otlp/oteltui__test_data.traces_only.jsonl": (547, 141, 8),
    "otlp/otlp2parquet__trace.json": (2, 1, 1),
    "otlp/otlp2parquet__trace.pb": (2, 1, 1),
    "otlp/otlp2parquet__traces.jsonl": (19, 19, 8),
    "otlp/otlp2parquet__traces.pb": (19, 19, 8),
    "jaeger/jaeger__domain_01.json": (5, 1, 2),
    "jaeger/jaeger__example_trace.json": (5, 1, 3),
    "jaeger/jaeger__ui_01.json": (5, 1, 2),
    # SOURCES.md lists no counts; the file's own "services" entry says 2 services x 2 spans.
    "jaeger/jaegerui__flamegraph_testTrace.json": (4, 1, 2),
    "jaeger/jaegerui__stats_spanLongerAsParent.json": (8, 1, 2),
    "jaeger/jaegerui__stats_testTraceNormal.json": (5, 1, 2),
    # Its IDs are "trace-123" / "span-1": not hex, so every span is rejected by name (see test below).
    "jaeger/jaegerui__tracegraph_testTrace.json": (0, 0, 0),
    "jaeger/tracecompass__opentracing_multiple_services.json": (5, 1, 3),
    "zipkin/zipkin__envoy.json": (1, 1, 1),
    "zipkin/zipkin__messaging-kafka.json": (28, 1, 2),
    "zipkin/zipkin__messaging.json": (4, 1, 2),
    "zipkin/zipkin__messaging2.json": (11, 1, 4),
    # Three of its 8 records are pieces of one span (the api client half and two records without kind or local
    # endpoint), merged into one span as Zipkin merges them: 6 spans, and no unknown_service.
    "zipkin/zipkin__netflix.json": (6, 1, 3),
    "zipkin/zipkin__simple-db-p6.json": (5, 1, 1),
    # Five Kafka receive records of one shared span ID on two pusher hosts are one span per host in Zipkin's
    # merge: 172 spans of 175 records.
    "zipkin/zipkin__smartthings-oauth-authorization.json": (172, 1, 8),
    "zipkin/zipkin__yelp.json": (16, 1, 6),
}


def test_every_shared_file_is_listed() -> None:
    on_disk = {str(p.relative_to(TRACES)) for p in TRACES.glob("*/*") if p.parent.name != "invalid"}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_import_counts_match_sources(store: ClickHouse, name: str) -> None:
    summary = import_paths([TRACES / name], StoreSink(ClickHouseTraceWriter(store)), progress=False)

    spans, traces, services = EXPECTED[name]
    assert (summary.spans, len(summary.traces), len(summary.services)) == (spans, traces, services)
    stored = store.query_rows("SELECT count(), uniqExact(TraceId), uniqExact(ServiceName) FROM otel_traces")[0]
    assert stored == (spans, traces, services)
    if spans:
        assert not summary.problems and summary.rejected == 0


def test_non_hex_jaeger_ids_are_rejected_by_name(store: ClickHouse) -> None:
    summary = import_paths(
        [TRACES / "jaeger/jaegerui__tracegraph_testTrace.json"], StoreSink(ClickHouseTraceWriter(store)), progress=False
    )
    assert summary.rejected == 11
    *spans, whole = summary.problems
    assert all("is not an ID of 1 to 32 hex digits" in p or "hex digits" in p for p in spans)
    assert "traceID 'trace-123'" in spans[0]
    assert whole.endswith("read as Jaeger JSON, and none of its spans could be converted")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("otlp2parquet__invalid_trace_invalid_base64.json", "traceId '!!!INVALID_BASE64!!!' is neither hex nor base64"),
        ("otlp2parquet__invalid_trace_invalid_kind.json", "kind 'SPAN_KIND_INVALID_TYPE' is not one of"),
        ("otlp2parquet__invalid_trace_mixed_encoding.json", "traceId 'zzz' is neither hex nor base64"),
    ],
)
def test_invalid_files_are_rejected_with_a_clear_message(store: ClickHouse, name: str, reason: str) -> None:
    summary = import_paths([TRACES / "invalid" / name], StoreSink(ClickHouseTraceWriter(store)), progress=False)
    assert (summary.spans, summary.rejected) == (0, 1)
    assert reason in summary.problems[0]


def test_missing_service_name_is_imported_with_a_warning(store: ClickHouse) -> None:
    summary = import_paths(
        [TRACES / "invalid/jaegerui__otlp2jaeger-in-error.json"],
        StoreSink(ClickHouseTraceWriter(store)),
        progress=False,
    )
    assert (summary.spans, summary.rejected, summary.services) == (1, 0, {"unknown_service"})
    assert "has no 'service.name'" in summary.warnings[0]


def test_import_through_an_endpoint_matches_a_local_import(hotspan_server: RunningServer) -> None:
    files = [
        TRACES / "otlp/otlp2parquet__traces.pb",
        TRACES / "zipkin/zipkin__yelp.json",
        TRACES / "otlp/otelproto__trace.json",
    ]
    summary: ImportSummary = import_paths(files, OtlpHttpSink(hotspan_server.base_url), progress=False)
    assert (summary.spans, len(summary.traces)) == (19 + 16 + 1, 19 + 1 + 1)
    services = httpx.get(f"{hotspan_server.base_url}/api/v1/services").json()["services"]
    assert set(services) == summary.services


def test_cli_import_prints_a_summary_and_fails_on_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"resourceSpans": [')
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "hotspan.cli",
            "import",
            "--no-progress",
            "--data-dir",
            str(tmp_path / "data"),
            str(TRACES / "zipkin/zipkin__netflix.json"),
            str(broken),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "files: 2  spans: 6  traces: 1  services: 3  rejected spans: 0" in run.stdout
    assert "broken.json" in run.stdout


def _cli_import(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "hotspan.cli", "import", "--no-progress", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize(
    ("endpoint", "says"),
    [("http://127.0.0.1:9", "cannot send to http://127.0.0.1:9/v1/traces"), ("notaurl", "must be an http://")],
)
def test_cli_import_to_a_bad_endpoint_fails_in_one_line(endpoint: str, says: str) -> None:
    run = _cli_import("--endpoint", endpoint, str(TRACES / "zipkin/zipkin__yelp.json"))
    assert run.returncode == 2
    assert run.stderr.startswith("hotspan import: ") and says in run.stderr
    assert "Traceback" not in run.stderr


def test_cli_import_into_a_served_data_dir_points_to_the_endpoint(hotspan_server: RunningServer) -> None:
    settings = hotspan_server.settings
    env = {**os.environ, "HOTSPAN_CLICKHOUSE_DSN": settings.clickhouse_dsn}
    run = _cli_import("--data-dir", str(settings.data_dir), str(TRACES / "zipkin/zipkin__yelp.json"), env=env)
    assert run.returncode == 2
    assert "import through it with --endpoint" in run.stderr and "Traceback" not in run.stderr


# Files people save traces in (tests/collector/formats/testdata/README.md): (spans, traces, services) each stores.
SAVED = Path(__file__).resolve().parents[1] / "collector" / "formats" / "testdata"
SAVED_EXPECTED = {
    "otel-sdk-console.out": (3, 1, 1),
    # Six printed objects: each of the three spans at its start (unended) and at its end.
    "otel-sdk-console-start-and-end.out": (3, 1, 1),
    # Both derived from jaeger's example trace: five spans of one trace in three services.
    "tempo-batches-from-jaeger-example.json": (5, 1, 3),
    "tempo-v2-from-jaeger-example.json": (5, 1, 3),
    # Five observations, the EVENT without endTime a point in time; the export names no service ("langfuse").
    "langfuse-observations-v2.json": (5, 1, 1),
    # A SigNoz v2 waterfall answer: four spans of services frontend and backend.
    "signoz-waterfall-v2.json": (4, 1, 2),
    # An any-agent AgentTrace: invoke_agent over two call_llm and an execute_tool, service support-agent.
    "anyagent-trace.json": (4, 1, 1),
}


@pytest.mark.parametrize("name", sorted(SAVED_EXPECTED))
def test_saved_file_imports_and_a_second_import_stores_nothing_twice(store: ClickHouse, name: str) -> None:
    sink = StoreSink(ClickHouseTraceWriter(store))

    first = import_paths([SAVED / name], sink, progress=False)
    second = import_paths([SAVED / name], sink, progress=False)

    spans, traces, services = SAVED_EXPECTED[name]
    assert (first.spans, len(first.traces), len(first.services), first.problems) == (spans, traces, services, [])
    assert (second.spans, second.traces, second.services) == (first.spans, first.traces, first.services)
    stored = store.query_rows("SELECT count(), uniqExact(TraceId, SpanId), uniqExact(ServiceName) FROM otel_traces")
    assert stored[0] == (spans, spans, services)


def test_array_of_otlp_requests_imports_each_request(store: ClickHouse, tmp_path: Path) -> None:
    names = ["otlp/otelproto__trace.json", "otlp/otlp2parquet__trace.json", "otlp/jaeger__otel_traces_01.json"]
    saved = tmp_path / "requests.json"
    saved.write_text("[" + ",".join((TRACES / name).read_text() for name in names) + "]")
    sink = StoreSink(ClickHouseTraceWriter(store))

    summary = import_paths([saved, saved], sink, progress=False)

    assert (summary.files, summary.spans, len(summary.traces)) == (2, 2 * (1 + 2 + 4), 1 + 1 + 2)
    assert store.query_rows("SELECT count() FROM otel_traces")[0] == (1 + 2 + 4,)


def test_cli_imports_every_saved_format_and_refuses_by_name(tmp_path: Path) -> None:
    refused = tmp_path / "signoz.json"
    refused.write_text('{"spans": [[{"spanId": "a", "durationNano": 5, "level": 0}]]}')
    files = [str(SAVED / name) for name in sorted(SAVED_EXPECTED)]

    run = _cli_import("--data-dir", str(tmp_path / "data"), *files, str(refused))

    assert run.returncode == 0, run.stderr
    spans = sum(spans for spans, _, _ in SAVED_EXPECTED.values())
    # The two Tempo files hold the same trace (both derived from jaeger's example): six distinct traces, and the
    # services checkout, langfuse, example-service-1 to -3, frontend, backend and support-agent.
    assert f"files: 8  spans: {spans}  traces: 6  services: 8  rejected spans: 0" in run.stdout
    assert "signoz.json: it looks like SigNoz's flamegraph answer" in run.stdout
