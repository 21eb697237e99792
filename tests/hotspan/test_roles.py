"""Hotspan split by role (``hotspan.roles``) over one store of the two-shard cluster layout, as
``deploy/docker-compose.yml`` runs it: two collectors receive (each trace through one of them, as the OpenTelemetry
Collector's ``loadbalancingexporter`` routes by trace ID), three pipeline workers (``HOTSPAN_PIPELINE_SHARD`` 0/3,
1/3, 2/3) analyse, a query node reads; each serves only its part and names its role on ``/healthz`` and
``/metrics``."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cluster_kit import layout_settings
from prometheus_client.parser import text_string_to_metric_families

from hotspan.cli import main
from hotspan.server import RunningServer, start_server
from hotspan.settings import ENVIRONMENT, SettingsError, load_settings
from storage.clickhouse import ClickHouse
from storage.migrations import migration_files
from testkit import TRACES

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
DEMO_TRACES, DEMO_SPANS = 141, 547
WORKERS = 3
COLLECTORS = ("collector-0", "collector-1")


def _route(trace_id: str) -> int:
    return zlib.crc32(trace_id.encode()) % len(COLLECTORS)


def _share(lines: list[dict], collector: int) -> str:
    """The demo capture's spans whose trace the load balancer routes to ``collector`` (trace ID hash, as the
    ``loadbalancingexporter`` does), as one OTLP/JSON body."""
    resource_spans = []
    for line in lines:
        for rs in line["resourceSpans"]:
            scopes = [
                dict(ss, spans=[s for s in ss["spans"] if _route(s["traceId"]) == collector]) for ss in rs["scopeSpans"]
            ]
            resource_spans.append(dict(rs, scopeSpans=[ss for ss in scopes if ss["spans"]]))
    return json.dumps({"resourceSpans": [rs for rs in resource_spans if rs["scopeSpans"]]})


def _post(server: RunningServer, body: str) -> None:
    answer = httpx.post(
        f"{server.base_url}/v1/traces", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def roles(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RunningServer]]:
    """Two collectors, three pipeline workers and a query node on one cluster-layout store, the demo capture split
    by trace between the collectors, each share in one request (so no trace gets late spans), and every trace
    analysed."""
    with layout_settings(chdb_dsn, "cluster", "r") as where:
        servers: dict[str, RunningServer] = {}
        try:
            for name, role, shard in [
                *((name, "collector", "0/1") for name in COLLECTORS),
                *((f"pipeline-{i}", "pipeline", f"{i}/{WORKERS}") for i in range(WORKERS)),
                ("query", "query", "0/1"),
            ]:
                servers[name] = start_server(
                    load_settings(
                        data_dir=tmp_path_factory.mktemp(name),
                        clickhouse_dsn=chdb_dsn,
                        http_port=0,
                        grpc_port=0,
                        role=role,
                        pipeline_shard=shard,
                        trace_idle_s=0.3,
                        # The query node with an admin listener (HOTSPAN_ADMIN_PORT), the others without.
                        admin_port=0 if role == "query" else -1,
                        **where,
                    )
                )
            lines = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
            for i, name in enumerate(COLLECTORS):
                _post(servers[name], _share(lines, i))
            _wait_until_analysed(servers["query"].storage.clickhouse)
            yield servers
        finally:
            for server in servers.values():
                server.stop()


def _wait_until_analysed(ch: ClickHouse) -> None:
    deadline = time.monotonic() + 60
    while ch.query_rows("SELECT uniqExact(TraceId) FROM hotspan_trace_summary")[0][0] < DEMO_TRACES:
        assert time.monotonic() < deadline, "the pipeline workers did not analyse every trace in 60 s"
        time.sleep(0.2)


def _counter(server: RunningServer, family_name: str) -> float:
    """The sum of the samples of counter ``family_name`` (without ``_total``) on the server's ``/metrics``."""
    text = httpx.get(f"{server.base_url}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == family_name
        for sample in family.samples
        if sample.name == f"{family_name}_total"
    )


def _calls(server: RunningServer) -> float:
    """Spans the server's pipeline counted (``traces_span_metrics_calls_total``, once per analysed trace)."""
    return _counter(server, "traces_span_metrics_calls")


def test_each_quiet_trace_is_analysed_once_by_the_worker_of_its_hash(roles: dict[str, RunningServer]) -> None:
    ch = roles["query"].storage.clickhouse
    # Raw rows, not FINAL: a second analysis of a trace would be a second row.
    assert ch.query_rows("SELECT count(), uniqExact(TraceId) FROM hotspan_trace_summary") == [(141, 141)]
    assert ch.query_rows("SELECT count(), uniqExact(TraceId, SpanId) FROM hotspan_span_analysis") == [(547, 547)]
    # Each worker counted exactly the spans of the traces its share names.
    shares = dict(
        ch.query_rows(f"SELECT cityHash64(TraceId) % {WORKERS} AS share, count() FROM otel_traces GROUP BY share")
    )
    for i in range(WORKERS):
        assert shares[i] > 0
        assert _calls(roles[f"pipeline-{i}"]) == shares[i]
    assert sum(shares.values()) == DEMO_SPANS
    # Nothing is due for any worker any more.
    for i in range(WORKERS):
        assert roles[f"pipeline-{i}"].trace_pipeline.run_once(force=True).analysed == 0  # type: ignore[union-attr]
    assert ch.query_rows("SELECT count() FROM hotspan_trace_summary") == [(141,)]


@pytest.mark.parametrize(
    ("name", "served", "refused"),
    [
        ("collector-1", [], ["/api/v1/services", "/ui/", "/mcp"]),
        ("pipeline-1", [], ["/api/v1/services", "/ui/", "/mcp"]),
        ("query", ["/api/v1/services", "/ui/", "/api/v1/traces?limit=5"], []),
    ],
)
def test_each_role_serves_its_part_only_and_names_itself(
    roles: dict[str, RunningServer], name: str, served: list[str], refused: list[str]
) -> None:
    server = roles[name]
    role = server.settings.role
    health = {"status": "ok", "storage": "ok", "role": role, "dead_letter_spans": 0}
    assert httpx.get(f"{server.base_url}/healthz", timeout=10).json() == health
    metrics = httpx.get(f"{server.base_url}/metrics", timeout=10).text
    assert f'hotspan_role{{role="{role}"}} 1.0' in metrics
    for path in served:
        assert httpx.get(f"{server.base_url}{path}", timeout=30).status_code == 200, path
    for path in refused:
        assert httpx.get(f"{server.base_url}{path}", timeout=30).status_code == 404, path
    ingests = role == "collector"
    accepted = httpx.post(f"{server.base_url}/v1/traces", json={"resourceSpans": []}, timeout=10).status_code
    assert (accepted == 200) is ingests
    assert (server.pipeline is not None, server.grpc_server is not None) == (ingests, ingests)
    assert (server.trace_pipeline is not None) is (role == "pipeline")
    assert (server.admin is not None) is (role == "query")
    if server.admin is not None:
        admin = f"http://{server.settings.host}:{server.admin.port}"
        assert httpx.get(f"{admin}/healthz", timeout=10).json() == health
        assert [httpx.get(f"{admin}{path}", timeout=10).status_code for path in ("/metrics", "/ui/")] == [404, 404]


def test_the_query_node_reads_what_both_collectors_wrote(roles: dict[str, RunningServer]) -> None:
    services = httpx.get(f"{roles['query'].base_url}/api/v1/services", timeout=30).json()["services"]
    assert len(services) == 8
    inserted = [_counter(roles[name], "hotspan_storage_inserted_spans") for name in COLLECTORS]
    assert all(inserted) and sum(inserted) == DEMO_SPANS


def test_a_share_resent_through_the_other_collector_is_stored_and_analysed_once(
    roles: dict[str, RunningServer],
) -> None:
    """A load balancer that retries a request on the other collector: nothing is stored or analysed twice."""
    first, other = (roles[name] for name in COLLECTORS)
    lines = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()]
    repeated = _counter(other, "hotspan_storage_repeated_spans")
    _post(other, _share(lines, 0))
    assert other.pipeline.flush(), "the resent share was not written in 30 s"  # type: ignore[union-attr]
    assert _counter(other, "hotspan_storage_repeated_spans") - repeated == _counter(
        first, "hotspan_storage_inserted_spans"
    )
    for i in range(WORKERS):
        assert roles[f"pipeline-{i}"].trace_pipeline.run_once(force=True).analysed == 0  # type: ignore[union-attr]
    ch = roles["query"].storage.clickhouse
    assert ch.query_rows("SELECT count() FROM otel_traces") == [(DEMO_SPANS,)]
    assert ch.query_rows("SELECT count(), uniqExact(TraceId) FROM hotspan_trace_summary") == [(141, 141)]


@pytest.mark.parametrize("shard", ["3/3", "1", "-1/2", "0/0"])
def test_a_pipeline_shard_outside_its_count_is_refused_by_name(shard: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="HOTSPAN_PIPELINE_SHARD"):
        load_settings(data_dir=tmp_path, pipeline_shard=shard)


def test_hotspan_migrate_applies_once_and_reapplies_on_demand(
    chdb_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hotspan migrate``, the deployment's first step (``deploy/README.md``), on a cluster-layout store."""
    every = ", ".join(str(version) for version, _, _ in migration_files())
    with layout_settings(chdb_dsn, "cluster", "m") as where:
        for name, value in where.items():
            monkeypatch.setenv(ENVIRONMENT[name], str(value).lower() if isinstance(value, bool) else str(value))
        for argv, says in [([], every), ([], "none pending"), (["--reapply"], every)]:
            assert main(["migrate", "--clickhouse-dsn", chdb_dsn, *argv]) == 0
            assert capsys.readouterr().out == f"applied migrations: {says}\n"


def test_one_process_runs_the_incident_lifecycle(roles: dict[str, RunningServer]) -> None:
    """Pipeline worker 0 owns the anomaly loop (``hotspan.roles.runs_incidents``); the query node only reads."""
    assert [name for name, server in roles.items() if server.anomaly_loop is not None] == ["pipeline-0"]
