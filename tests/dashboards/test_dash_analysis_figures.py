"""The analysis pages' pure builders (``dashboards.analysis_figures``) on hand-built frames: stage colors, shares
over time, percentile and hotspot tables, the aggregated flame graph and the finding cards."""

from __future__ import annotations

import math
from urllib.parse import parse_qs

import numpy as np
import polars as pl
from dash import dcc, html
from dash.development.base_component import Component
from dash_support import texts, walk
from span_frames import T0_NS

from analysis import STAGES
from dashboards.analysis_figures import (
    aggregated_flame_figure,
    finding_cards,
    hotspot_table,
    latency_facts,
    stage_percentile_table,
    stage_shares_figure,
    window_quality_table,
)
from dashboards.colors import STAGE_COLORS
from dashboards.evidence import evidence_row
from dashboards.links import drilldown, search_href
from dashboards.windows import analysis_window
from diagnosis import Finding
from units import NS_PER_MS as MS


def _rows(table: Component, class_name: str) -> list[Component]:
    """The rows of ``table`` with ``class_name``."""
    return [node for node in walk(table) if getattr(node, "className", None) == class_name]


def _finite(values: object) -> bool:
    return all(math.isfinite(float(v)) for v in np.asarray(values, dtype=float).ravel())


def test_every_stage_has_a_distinct_color() -> None:
    assert list(STAGE_COLORS) == list(STAGES)
    assert len(set(STAGE_COLORS.values())) == len(STAGES)


def test_stage_shares_figure_has_no_nan_and_each_bucket_sums_to_its_share() -> None:
    shares = pl.DataFrame(
        {
            "bucket_start_ns": [T0_NS, T0_NS, T0_NS, T0_NS + 60 * 10**9, T0_NS + 60 * 10**9],
            "stage": ["agent", "llm.decode", "tool", "agent", "llm.decode"],
            "requests": [2, 2, 2, 1, 1],
            "stage_ns": [1, 3, 0, 1, 1],
            "e2e_ns": [4, 4, 4, 2, 2],
            "share_of_e2e": [0.25, 0.75, None, 0.5, 0.5],  # a null share (zero latency) must not leak as NaN
        }
    )
    figure = stage_shares_figure(shares)
    # Named for people, as the Per stage table names them; tool has no time: no trace.
    assert [trace.name for trace in figure.data] == ["agent (orchestration)", "LLM decode"]
    assert all(_finite(trace.y) for trace in figure.data)
    per_bucket = np.sum([np.asarray(trace.y, dtype=float) for trace in figure.data], axis=0)
    assert np.allclose(per_bucket, [100.0, 100.0])
    assert not stage_shares_figure(shares.clear()).data


def test_stage_percentile_table_lists_stages_with_time_in_ms_and_share() -> None:
    percentiles = pl.DataFrame(
        {
            "group": ["", "", ""],
            "stage": ["agent", "llm.decode", "tool"],
            "requests": [4, 4, 4],
            "p50_ns": [1.0 * MS, 6.0 * MS, 0.0],
            "p95_ns": [2.0 * MS, 9.5 * MS, 0.0],
            "p99_ns": [2.5 * MS, 9.9 * MS, 0.0],
            "mean_ns": [1.2 * MS, 6.5 * MS, 0.0],
            "share_of_e2e": [0.15, 0.85, 0.0],
        }
    )
    table = stage_percentile_table(percentiles)
    rows = _rows(table, "hs-stage-row")
    assert len(rows) == 2  # a stage with no time is left out
    cells = texts(rows[1])
    assert cells[:2] == ["LLM decode", "4"] and "9.500" in cells and "85.0%" in cells
    assert "nan" not in " ".join(texts(table)).lower()
    # A drill-down column: each stage's slowest traces and its search.
    drilled = stage_percentile_table(
        percentiles, lambda stage: drilldown("/ui", ["ab" * 16] if stage == "agent" else [], "/ui/?sort=longest")
    )
    links = [node for node in walk(drilled) if isinstance(node, dcc.Link)]
    assert [link.href for link in links] == [f"/ui/trace/{'ab' * 16}", "/ui/?sort=longest", "/ui/?sort=longest"]
    assert links[0].children == "abababab"
    # A 64-bit ID (Zipkin, Jaeger) reads by its digits, not by the zeros it is stored with (issue 31).
    (example, _) = [
        node for node in walk(drilldown("/ui", ["0" * 16 + "1234abcd5678ef90"], "/ui/")) if isinstance(node, dcc.Link)
    ]
    assert example.children == "1234abcd" and example.href == f"/ui/trace/{'0' * 16}1234abcd5678ef90"
    assert isinstance(stage_percentile_table(percentiles.clear()), html.P)


def test_latency_facts_show_dashes_for_metrics_no_request_reports() -> None:
    latency = pl.DataFrame(
        {"group": [""], "requests": [3]}
        | {f"e2e_{p}": [v * MS] for p, v in (("p50_ns", 10.0), ("p95_ns", 20.0), ("p99_ns", 30.0))}
        | {f"ttft_{p}": [None] for p in ("p50_ns", "p95_ns", "p99_ns")}
        | {f"tpot_{p}": [float("nan")] for p in ("p50_ns", "p95_ns", "p99_ns")},
    )
    shown = texts(latency_facts(latency))
    assert "10.000 / 20.000 / 30.000" in shown
    assert shown.count("— / — / —") == 2
    ids = {node.id for node in walk(latency_facts(latency)) if getattr(node, "id", None)}
    assert ids == {"stages-fact-e2e", "stages-fact-ttft", "stages-fact-tpot"}


def test_window_quality_table_counts_each_repair_over_the_requests_that_record_it() -> None:
    counts = {"enveloped": 3, "attached": 2, "outliving": 5, "implausible_root": 0, "reattached": 6}
    quality = pl.DataFrame({"group": [""], "requests": [12], "unrecorded": [2]} | {k: [v] for k, v in counts.items()})
    table = window_quality_table(
        quality, lambda repair: drilldown("/ui", ["ab" * 16] if repair == "outliving" else [], None)
    )
    rows = {node.id: texts(node) for node in walk(table) if getattr(node, "className", None) == "hs-quality-row"}
    assert list(rows) == [
        f"stages-quality-{repair}" for repair in ("enveloped", "attached", "outliving", "implausible_root")
    ]
    # Shares of the 10 requests whose analysis recorded data quality; the 2 older ones are said apart.
    assert rows["stages-quality-outliving"][1:3] == ["5", "50.0%"] and rows["stages-quality-implausible_root"][1:3] == [
        "0",
        "0.0%",
    ]
    shown = " ".join(texts(table))
    assert "6 of 10 requests" in shown and "2 requests were analysed before data quality was stored" in shown
    # Example links only: the trace search cannot list a repair's requests.
    links = [node.href for node in walk(table) if isinstance(node, dcc.Link)]
    assert links == [f"/ui/trace/{'ab' * 16}"]
    assert isinstance(window_quality_table(quality.clear()), html.P)
    assert "before data quality" not in " ".join(texts(window_quality_table(quality.with_columns(unrecorded=0))))


def test_hotspot_table_shows_share_column_asked_for() -> None:
    ranking = pl.DataFrame(
        {
            "service_name": ["agent", "vllm"],
            "name": ["plan", "llm_request"],
            "spans": [10, 4],
            "self_total_ns": [30 * MS, 10 * MS],
            "self_p95_ns": [5.0 * MS, 3.0 * MS],
            "self_mean_ns": [3.0 * MS, 2.5 * MS],
            "duration_total_ns": [40 * MS, 10 * MS],
            "hotspot_spans": [2, 0],
            "self_share": [0.75, 0.25],
            "p95_share": [0.625, 0.375],
        },
        schema_overrides={"spans": pl.UInt64, "self_total_ns": pl.UInt64, "hotspot_spans": pl.UInt64},
    )
    rows = _rows(hotspot_table(ranking, "p95_share"), "hs-hotspot-row")
    assert [texts(row)[:2] for row in rows] == [["agent", "plan"], ["vllm", "llm_request"]]
    assert texts(rows[0])[-1] == "62.5%" and texts(rows[0])[3] == "30.000"
    assert texts(_rows(hotspot_table(ranking, "self_share"), "hs-hotspot-row")[1])[-1] == "25.0%"
    assert isinstance(hotspot_table(ranking.clear(), "self_share"), html.P)


def test_aggregated_flame_figure_keeps_ids_parents_and_total_values() -> None:
    flame = pl.DataFrame(
        {
            "id": ["root", "a" * 16, "b" * 16, "c" * 16],
            "parent": ["", "root", "a" * 16, "a" * 16],
            "label": ["all traces", "agent:plan", "vllm:llm_request", "tools:search"],
            "service_name": ["", "agent", "vllm", "tools"],
            "name": ["", "plan", "llm_request", "search"],
            "depth": [0, 1, 2, 2],
            "self_ns": [0, 2 * MS, 5 * MS, 3 * MS],
            "total_ns": [10 * MS, 10 * MS, 5 * MS, 3 * MS],
            "count": [7, 7, 7, 3],
        }
    )
    icicle = aggregated_flame_figure(flame).data[0]
    assert list(icicle.ids) == flame["id"].to_list() and list(icicle.parents) == flame["parent"].to_list()
    assert list(icicle.values) == [10 * MS, 10 * MS, 5 * MS, 3 * MS]
    assert icicle.branchvalues == "total"
    assert icicle.customdata[0] == "7 traces" and icicle.customdata[3].endswith("3 spans")
    assert len(set(icicle.marker.colors[1:])) == 3  # one color per service
    assert not aggregated_flame_figure(flame.head(1)).data  # the root alone: nothing analysed


def test_finding_cards_show_badge_evidence_remedy_and_trace_links() -> None:
    finding = Finding(
        cause="queue_saturation",
        title="Requests wait 40% of their time in vLLM's queue",
        severity="critical",
        confidence=0.82,
        evidence={"queue_share_p95": 0.4, "queue_ms_p95": 812.5, "example_trace_ids": ["ab" * 16, "cd" * 16]},
        remedy="Add replicas or lower max_num_seqs.",
    )
    cards = finding_cards([finding], "/ui/trace/")
    shown = texts(cards)
    assert "critical" in shown and "confidence 82%" in shown and finding.title in shown
    # Evidence in words with units: the keys' unit and statistic suffixes say how (dashboards.evidence).
    assert "Queue share, p95" in shown and "40.0%" in shown and "812.50 ms" in shown
    assert "queue_share_p95" not in shown
    assert "example_trace_ids" not in shown  # shown as links instead
    links = [node for node in walk(cards) if isinstance(node, dcc.Link)]
    assert [link.href for link in links] == [f"/ui/trace/{'ab' * 16}", f"/ui/trace/{'cd' * 16}"]
    badge = next(node for node in walk(cards) if getattr(node, "className", "").startswith("hs-badge"))
    assert badge.className == "hs-badge hs-badge-critical"


def test_finding_cards_without_findings_say_so() -> None:
    assert "No findings" in texts(finding_cards([], "/ui/trace/"))


def test_analysis_window_opens_both_ends_for_all_only() -> None:
    now = T0_NS
    assert analysis_window("all", now, (now - 3600 * 10**9, now))[:2] == (None, None)
    start, end, step = analysis_window("1h", now, None)
    assert (start, end) == (now - 3600 * 10**9, now) and step % 60 == 0


def test_evidence_reads_in_words_with_units() -> None:
    assert evidence_row("queue_ms_p95", 812.5) == ("Queue, p95", "812.50 ms")
    assert evidence_row("queue_share", 0.25) == ("Queue share", "25.0%")
    assert evidence_row("tpot_growth_ratio", 2.3) == ("TPOT growth", "×2.30")
    assert evidence_row("repeat_prefill_ratio", 0.004) == ("Repeat prefill", "×0.004")
    # A level in [0, 1], not a factor: "CPU contention level ratio ×0.00" read as generated (issue 31).
    assert evidence_row("cpu_contention_level_ratio", 0.0) == ("Host CPU contention", "0.0%")
    assert evidence_row("cpu_contention_level_ratio", 0.82) == ("Host CPU contention", "82.0%")
    assert evidence_row("prompt_tokens_p50", 1234) == ("Prompt, median", "1,234 tokens")
    assert evidence_row("kv_cache_usage_max_share", None) == ("KV cache usage max share", "—")
    assert evidence_row("stall_s_total", 90.0) == ("Stall, total", "1.5 min")
    assert evidence_row("caller_service_names", ["a", "b"]) == ("Caller service names", "a, b")


def test_search_links_carry_the_scope_sorted_longest() -> None:
    href = search_href("/ui", lookback="1h", service="gw", operation="POST /", model="m 1", tenant="acme")
    assert href.startswith("/ui/?")
    query = parse_qs(href.split("?", 1)[1])
    assert query["service"] == ["gw"] and query["operation"] == ["POST /"] and query["sort"] == ["longest"]
    assert query["lookback"] == ["1h"]
    assert query["attributes"] == ['gen_ai.request.model="m 1" tenant_id="acme"']
    assert search_href("/ui") == "/ui/?sort=longest"
