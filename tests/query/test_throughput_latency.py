"""The throughput-latency read on a real embedded ClickHouse: vLLM ``llm_request`` spans of four engine runs
with known timings (``llm_request_spans.RUNS``, figures recomputed here with numpy) grouped by configuration and
bucket, the Pareto frontier marked, the model filter, tenant isolation, and requests of traces tail sampling
dropped still counted (never linked)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llm_request_spans import NS, RUNS, T0, engine_run, expected_point, export_request

from collector.ingest import Ingestor
from query.service import QueryService
from query.throughput_latency import CONFIG_KEYS
from storage.clickhouse import ClickHouse
from storage.engine_reader import EngineWindow
from storage.writer import ClickHouseTraceWriter
from testkit import migrated_database, query_room

MINUTE = 60 * NS
WINDOW = EngineWindow(T0, T0 + 10 * MINUTE, MINUTE)
INTRUDER = engine_run("globex", "llama-8b", 999, 30.0, 0.1, 30, 0.1, 0.01, 100)
"""Another tenant's engine, faster than all of the default tenant's: it must neither appear nor dominate."""


@pytest.fixture(scope="module")
def database(chdb_dsn: str) -> Iterator[ClickHouse]:
    """One database for the module: the four runs under the default tenant, :data:`INTRUDER` under ``globex``,
    the runs again under ``sampled`` (where one run's traces get dropped); the default tenant's runs sent twice
    (a retry), which must count once."""
    with migrated_database(chdb_dsn, "tl") as ch:
        ingest(ch)
        yield ch


@pytest.fixture(scope="module")
def room(database: ClickHouse) -> QueryService:
    return query_room(database)


def ingest(ch: ClickHouse) -> None:
    ingestor = Ingestor(ClickHouseTraceWriter(ch))
    for _ in range(2):
        assert ingestor.export(export_request(RUNS)).rejected == 0
    assert ingestor.export(export_request([INTRUDER], seed=1), tenant="globex").rejected == 0
    assert ingestor.export(export_request(RUNS, seed=2), tenant="sampled").rejected == 0


def _points(room: QueryService, window: EngineWindow = WINDOW, **options: str) -> list[dict]:
    view = room.throughput_latency(window, tenant="default", **options)  # type: ignore[arg-type]
    return view.points.to_dicts()


def test_points_per_configuration_and_bucket_match_the_spans(room: QueryService) -> None:
    points = _points(room)
    by_key = {(p["max_num_seqs"], p["model"], p["bucket_start_ns"]): p for p in points}
    seqs8, seqs32, seqs128, other = RUNS
    expected = {
        ("8", "llama-8b", T0): expected_point(seqs8, end_s=60),
        ("8", "llama-8b", T0 + MINUTE): expected_point(seqs8, first_s=60),
        ("32", "llama-8b", T0 + 2 * MINUTE): expected_point(seqs32),
        ("128", "llama-8b", T0 + 3 * MINUTE): expected_point(seqs128),
        ("8", "qwen-7b", T0 + 4 * MINUTE): expected_point(other),
    }
    assert set(by_key) == set(expected)
    for key, figures in expected.items():
        point = by_key[key]
        for name, value in figures.items():
            assert point[name] == pytest.approx(value, rel=1e-6), (key, name)
        assert point["service_name"] == "vllm"
        assert point["enable_prefix_caching"] == "true" and point["tensor_parallel_size"] == ""
        assert (
            point["label"] == f"{key[1]} max_num_seqs={key[0]} max_batched_tokens=4096 chunked_prefill=true "
            "prefix_caching=true"
        )
        # Examples: the bucket's slowest requests first (each request's e2e grows with its index).
        assert len(point["example_trace_ids"]) == min(3, point["requests"])
        assert point["example_trace_ids"] == sorted(point["example_trace_ids"], reverse=True)
    assert set(CONFIG_KEYS) <= set(points[0])


def test_frontier_holds_the_undominated_points(room: QueryService) -> None:
    frontier = {(p["max_num_seqs"], p["model"]) for p in _points(room) if p["on_frontier"]}
    # seqs32 beats seqs8 and the other model on both axes; seqs128 has the most requests per second.
    assert frontier == {("32", "llama-8b"), ("128", "llama-8b")}
    # By TTFT p50 against output tokens/s: seqs128 (50 tokens per request) no longer leads on throughput.
    by_tokens = _points(room, throughput="output_tokens_per_s", latency="ttft_p50_ms")
    assert {p["max_num_seqs"] for p in by_tokens if p["on_frontier"]} == {"32"}


def test_model_filter_and_whole_window_bucket(room: QueryService) -> None:
    whole = EngineWindow(T0, T0 + 10 * MINUTE, 10 * MINUTE + 1, model="llama-8b")
    points = _points(room, whole)
    assert sorted(p["max_num_seqs"] for p in points) == ["128", "32", "8"]
    seqs8 = next(p for p in points if p["max_num_seqs"] == "8")
    assert seqs8["requests"] == 10 and seqs8["requests_per_s"] == pytest.approx(
        expected_point(RUNS[0])["requests_per_s"]
    )
    assert _points(room, EngineWindow(T0, T0 + 10 * MINUTE, MINUTE, model="absent")) == []


def test_other_tenants_spans_stay_out(room: QueryService) -> None:
    assert all(p["max_num_seqs"] != "999" for p in _points(room))
    admin = room.throughput_latency(WINDOW, tenant=None).points
    assert "999" in admin["max_num_seqs"].to_list()
    globex = room.throughput_latency(WINDOW, tenant="globex").points
    assert globex["max_num_seqs"].to_list() == ["999"] and globex["on_frontier"].to_list() == [True]


def test_requests_of_dropped_traces_still_count_but_are_not_linked(room: QueryService, database: ClickHouse) -> None:
    ch = database
    # What tail sampling does to a dropped trace (processors.pipeline.tail_sampling): its spans deleted, its
    # summary kept with Sampled false. Here: every trace of the max_num_seqs=32 run of tenant "sampled".
    before = {p["max_num_seqs"]: p for p in room.throughput_latency(WINDOW, tenant="sampled").points.to_dicts()}
    dropped = before["32"]["example_trace_ids"]
    run = "Tenant = 'sampled' AND ResourceAttributes['vllm.config.max_num_seqs'] = '32'"
    traces = [row[0] for row in ch.query_rows(f"SELECT DISTINCT TraceId FROM otel_traces WHERE {run}")]
    assert set(dropped) <= set(traces) and len(traces) == 21
    ch.command(f"DELETE FROM otel_traces WHERE {run}")
    assert ch.query_rows(f"SELECT count() FROM otel_traces WHERE {run}") == [(0,)]
    for trace in traces:
        ch.command(
            "INSERT INTO hotspan_trace_summary (Tenant, Timestamp, TraceId, Version, Sampled) "
            "VALUES ('sampled', fromUnixTimestamp64Nano({t:Int64}), {trace:String}, 1, false)",
            {"t": T0 + 120 * NS, "trace": trace},
        )
    after = {p["max_num_seqs"]: p for p in room.throughput_latency(WINDOW, tenant="sampled").points.to_dicts()}
    assert after["32"]["requests"] == before["32"]["requests"] == 20
    assert after["32"]["requests_per_s"] == before["32"]["requests_per_s"]
    assert (
        after["32"]["example_trace_ids"] == []
        and after["128"]["example_trace_ids"] == before["128"]["example_trace_ids"]
    )
