"""Collector-side hotspot flags (static rule, rolling p95, SDK) and the self-time ranking, on a real embedded
ClickHouse; plus the rule file's validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_support import MS, T0, Span, otlp_request, store_requests, store_spans

from analysis import STAGES
from collector.ingest import Ingestor
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.hotspot_rules import HotspotRulesError, load_hotspot_rules
from processors.pipeline.trace_pipeline import TracePipeline
from query.analysis_service import AnalysisService
from storage.analysis_store import AnalysisFilter, ClickHouseAnalysisStore
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader

RULES = """
version: 1
static:
  - {service: "checkout*", operation: "slow *", threshold_ms: 50, why: checkout SLO}
rolling: {quantile: 0.95, min_samples: 20}
"""


def _trace_id(number: int) -> str:
    return f"{number:032x}"


def _service(store: ClickHouse, tmp_path: Path) -> tuple[TracePipeline, AnalysisService]:
    rules = tmp_path / "hotspots.yaml"
    rules.write_text(RULES)
    config = TracePipelineConfig(hotspot_rules=load_hotspot_rules(rules))
    analysis_store = ClickHouseAnalysisStore(store, STAGES)
    reader = ClickHouseTraceReader(store)
    return TracePipeline(analysis_store, reader, config), AnalysisService(reader, analysis_store, config)


def _flags(store: ClickHouse) -> dict[str, tuple[bool, str, float | None]]:
    rows = store.query_rows(
        "SELECT SpanName, IsHotspot, HotspotReason, HotspotThresholdMs FROM hotspan_span_analysis FINAL"
    )
    return {name: (flag, reason, threshold) for name, flag, reason, threshold in rows}


def test_static_rolling_and_sdk_flags(store: ClickHouse, ingestor: Ingestor, tmp_path: Path) -> None:
    pipeline, service = _service(store, tmp_path)
    # 40 requests of "search" taking 10 ms, one taking 500 ms: p95 of the 41 is 10 ms, so only the slow one
    # lies strictly above it. Each is its own trace, one second apart.
    searches = []
    for i in range(41):
        duration = 500 if i == 40 else 10
        name = "search slow" if i == 40 else f"search {i}"
        spans = [
            Span("0000000000000001", "", "retriever", "search", 0, duration),
            Span("0000000000000002", "0000000000000001", "retriever", name, 0, duration),
        ]
        searches.append(otlp_request(_trace_id(i + 1), spans, T0 + i * 1000 * MS))
    store_requests(ingestor, searches)
    # A static rule: checkout "slow *" over 50 ms. 80 ms is flagged, 30 ms is not.
    store_spans(
        ingestor,
        _trace_id(100),
        [
            Span("0000000000000001", "", "checkout", "POST /buy", 0, 200),
            Span("0000000000000002", "0000000000000001", "checkout", "slow charge", 10, 90),
            Span("0000000000000003", "0000000000000001", "checkout", "slow refund", 100, 130),
            # Flagged by the SDK's HotspotSpanProcessor (its threshold rides along), under no server rule.
            Span(
                "0000000000000004",
                "0000000000000001",
                "checkout",
                "render",
                140,
                150,
                attributes={
                    "hotspan.hotspot": True,
                    "hotspan.hotspot.reason": "p95",
                    "hotspan.hotspot.threshold_ms": 4.5,
                },
            ),
        ],
    )

    assert pipeline.run_once(force=True).analysed == 42

    flags = _flags(store)
    assert flags["slow charge"] == (True, "static", 50.0)
    assert flags["slow refund"] == (False, "", None)
    assert flags["render"] == (True, "sdk", 4.5)
    # The root "search" spans: 41 of them, the slowest over the rolling p95 of 10 ms.
    slow_roots = store.query_rows(
        "SELECT DurationNs, HotspotReason, HotspotThresholdMs FROM hotspan_span_analysis FINAL "
        "WHERE SpanName = 'search' AND IsHotspot"
    )
    assert slow_roots == [(500 * MS, "p95", 10.0)]
    assert store.query_rows("SELECT sum(HotspotCount) FROM hotspan_trace_summary FINAL") == [(3,)]

    report = service.hotspots(AnalysisFilter(), 5, tenant="default")
    flagged = report.flagged.select("name", "reason").rows()
    assert flagged == [("search", "p95"), ("slow charge", "static"), ("render", "sdk")]
    # Self time: each "search" root has none (its one child covers it), each child all of its duration; POST
    # /buy has 200 - (80 + 30 + 10) = 80 ms. The longest child (500 ms) leads both rankings.
    ranking = {(row["service_name"], row["name"]): row for row in report.by_self_time.iter_rows(named=True)}
    assert list(ranking)[:2] == [("retriever", "search slow"), ("checkout", "POST /buy")]
    assert ranking[("checkout", "POST /buy")]["self_total_ns"] == 80 * MS
    assert ranking[("retriever", "search slow")]["self_p95_ns"] == 500 * MS
    # Of all 1100 ms of self time: 40 × 10 + 500 + 80 + 80 + 30 + 10.
    assert ranking[("retriever", "search slow")]["self_share"] == pytest.approx(500 / 1100)
    assert report.by_p95_self_time.row(0, named=True)["name"] == "search slow"


def test_hotspot_rule_files_are_validated_with_every_problem_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "static:\n  - {threshold_ms: -1}\n  - {service: [], threshold_ms: 5, extra: 1}\nrolling: {quantile: 1.5}\n"
    )
    with pytest.raises(HotspotRulesError) as error:
        load_hotspot_rules(bad)
    assert {issue.split(":")[0] for issue in error.value.issues} == {
        "static[0].threshold_ms",
        "static[1].service",
        "static[1].extra",
        "rolling.quantile",
    }
    default = load_hotspot_rules()
    assert (default.static, default.rolling.quantile, default.rolling.min_samples) == ([], 0.95, 20)
