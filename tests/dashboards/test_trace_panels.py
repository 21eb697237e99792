"""The trace page's pure builders (``dashboards.trace_panels``) and colours (``dashboards.colors``) on hand-built
traces: the timeline's starting data, the header's warnings, the stage panel, a span's and an aggregate's detail
with units, the flame figure."""

from __future__ import annotations

import json

import polars as pl
from dash import html
from dash_support import texts, walk
from span_frames import spans_frame

from analysis import STAGES
from analysis.stage_rules import load_stage_rules
from analysis.tree import ADJUSTMENTS
from dashboards.colors import SERVICE_PALETTE, STAGE_COLORS, service_color
from dashboards.trace_panels import (
    ADJUSTMENT_NOTES,
    FIRST_WINDOW_ROWS,
    flame_figure,
    group_detail,
    header,
    page_meta,
    span_detail,
    stage_panel,
)
from query.trace_flame import trace_flame
from query.trace_model import TraceView, build_trace_view
from units import NS_PER_MS as MS

RULES = load_stage_rules()
ENGINE = {
    "gen_ai.request.model": "llama-3-8b",
    "gen_ai.usage.prompt_tokens": "1200",
    "gen_ai.usage.completion_tokens": "80",
    "gen_ai.latency.time_in_queue": "0.005",
    "gen_ai.latency.time_in_model_prefill": "0.015",
    "gen_ai.latency.time_in_model_decode": "0.056",
    "gen_ai.latency.time_to_first_token": "0.02",
}


def _agent() -> TraceView:
    """agent [0,100] -> vLLM llm_request [10,90] (queue 5, prefill 15, decode 56 ms); an orphan and a repeat."""
    frame = spans_frame(
        [("root", "", 0, 100 * MS), ("eng", "root", 10 * MS, 80 * MS), ("lost", "gone", 95 * MS, MS)],
        service="agent",
    )
    frame = frame.with_columns(
        pl.Series("name", ["POST /v1/agent", "llm_request", "late"]),
        pl.Series("service_name", ["agent", "vllm", "agent"]),
        pl.Series("kind", ["Server", "Server", "Internal"]),
        pl.Series("attributes", [{"http.route": "/v1/agent"}, ENGINE, {}], dtype=pl.Map(pl.String, pl.String)),
    )
    return build_trace_view("ab" * 16, pl.concat([frame, frame.head(1)]), RULES)


def test_service_colours_are_stable_and_stages_have_their_own_palette() -> None:
    assert service_color("checkout") == service_color("checkout")
    assert service_color("checkout") in SERVICE_PALETTE
    assert len({service_color(f"svc-{i}") for i in range(64)}) > len(SERVICE_PALETTE) // 2
    assert not set(STAGE_COLORS.values()) & set(SERVICE_PALETTE)
    assert list(STAGE_COLORS) == list(STAGES) and len(set(STAGE_COLORS.values())) == len(STAGES)


def test_page_meta_is_plain_json_with_every_part_the_widget_draws() -> None:
    view = _agent()
    meta = page_meta(view, "load-1")
    decoded = json.loads(json.dumps(meta))
    assert decoded["load_id"] == "load-1" and decoded["span_count"] == 3
    assert [service["name"] for service in decoded["services"]] == ["agent", "vllm"]
    assert decoded["services"][1]["color"] == service_color("vllm")
    assert [stage["name"] for stage in decoded["stages"]] == list(STAGES)
    assert decoded["rows"]["total"] == 3 and not decoded["aggregatable"]
    assert len(decoded["minimap"]["start"]) == 3
    assert decoded["lane"]["start"][0] == 0


def test_page_meta_starts_with_a_screenful_of_rows() -> None:
    children = [(f"c{i:03d}", "root", i * MS, MS) for i in range(200)]
    view = build_trace_view("cd" * 16, spans_frame([("root", "", 0, 300 * MS), *children]), RULES)
    rows = page_meta(view, "load-1")["rows"]
    assert rows["total"] == 201 and rows["offset"] == 0
    assert len(rows["rows"]["span"]) == FIRST_WINDOW_ROWS


def test_header_names_the_repairs() -> None:
    shown = " ".join(texts(header(_agent())))
    assert "POST /v1/agent" in shown and "ab" * 16 in shown
    assert "1 span(s) shown as extra roots" in shown
    assert "1 repeated span ID(s)" in shown
    # The data-quality line (issue 27): with an orphan beside it the root is no longer the whole request.
    assert "window is the envelope of its spans" in shown and "1 span(s) analysed under another parent" in shown


def test_header_says_when_only_the_first_spans_were_read() -> None:
    view = _agent()
    part = TraceView(view.trace_id, view.analysis, stored_spans=1_000_000)
    shown = " ".join(texts(header(part)))
    assert "3 of 1,000,000" in shown and "shows its first 3 by start time" in shown
    assert page_meta(part, "load-1")["stored_spans"] == 1_000_000
    assert "by start time" not in " ".join(texts(header(view)))
    # With the whole trace summed by operation in the store, the header lists it, with units.
    operations = pl.DataFrame(
        {
            "service_name": ["agent", "vllm"],
            "name": ["execute_tool", "llm_request"],
            "span_count": [600_000, 400_000],
            "duration_ns_sum": [90 * 10**9, 40 * 10**9],
            "duration_ns_max": [2 * 10**9, 250 * MS],
            "error_count": [3, 0],
            "first_start_ns": [0, 10],
        }
    )
    summed = " ".join(texts(header(TraceView(view.trace_id, view.analysis, 1_000_000, operations))))
    assert "all 1,000,000 spans, summed in storage" in summed
    assert "600,000" in summed and "llm_request" in summed and "1.5 min" in summed and "250.00 ms" in summed
    assert "summed in storage" not in shown


def test_stage_panel_names_the_dominant_stage_in_words() -> None:
    panel = stage_panel(_agent())
    shown = " ".join(texts(panel))
    assert "Most of this trace's time is" in shown and "LLM decode" in shown
    dominant = next(node for node in walk(panel) if getattr(node, "id", None) == "trace-dominant-stage")
    assert dominant.children == "LLM decode"


def test_stage_panel_says_which_attribution_to_trust_on_an_async_trace() -> None:
    # A 10 ms root, and a job started 2 ms after it returned that runs 6 ms (a flush after the answer: work started
    # after the request's window ended, which the request did not wait for).
    frame = spans_frame([("root", "", 0, 10 * MS), ("job", "root", 12 * MS, 6 * MS)], service="agent")
    view = build_trace_view("cd" * 16, frame, RULES)
    assert view.root_duration_ns == 10 * MS and int(view.request_stages_ns.sum()) == 10 * MS
    note = " ".join(texts(stage_panel(view)))
    assert "The Stages page counts this request as its window's 10.00 ms" in note
    assert "whole trace (18.00 ms, 16.00 ms of it traced)" in note and "trust the bar above" in note
    assert "The Stages page counts" not in " ".join(texts(stage_panel(_agent())))  # they agree there
    # A job started while the root was open that outlives it is the request's work: kept whole, the window with it.
    started_inside = spans_frame([("root", "", 0, 10 * MS), ("job", "root", 5 * MS, 8 * MS)], service="agent")
    view = build_trace_view("ce" * 16, started_inside, RULES)
    assert view.root_duration_ns == 13 * MS and int(view.request_stages_ns.sum()) == 13 * MS
    assert "The Stages page counts" not in " ".join(texts(stage_panel(view)))


def test_span_detail_shows_the_phases_the_model_call_and_attributes_with_units() -> None:
    view = _agent()
    engine = view.span_index("eng")
    assert engine is not None
    shown = texts(span_detail(view, engine))
    assert "split into LLM tokenize, LLM queue, LLM prefill, LLM decode, LLM detokenize (below)" in shown
    assert "llama-3-8b" in shown and "1,200 tokens" in shown and "80 tokens" in shown
    assert "56.00 ms (0.056 s)" in shown  # vLLM's seconds as a duration, the stored value beside it
    root = texts(span_detail(view, view.primary_root))
    assert "Untraced (own) time" in root and "/v1/agent" in root and "Stage pieces" not in root


def test_group_detail_lists_the_slowest_members() -> None:
    rows = [("p", "", 0, 100)] + [(f"c{i}", "p", i * 10, i + 1) for i in range(6)]
    view = build_trace_view("ab" * 16, spans_frame(rows, service="api").with_columns(pl.lit("op").alias("name")), RULES)
    leader = view.span_index("c0")
    assert leader is not None
    detail = group_detail(view, leader)
    buttons = [node for node in walk(detail) if isinstance(node, html.Button)]
    assert [button.id["span"] for button in buttons] == [view.span_index(f"c{i}") for i in range(5, -1, -1)]
    assert "api: op ×6" in texts(detail)


def test_flame_figure_is_a_valid_icicle() -> None:
    figure = flame_figure(trace_flame(_agent()))
    (icicle,) = figure.data
    ids, parents = list(icicle.ids), list(icicle.parents)
    assert parents.count("") == 1 and all(parent in ids for parent in parents if parent)
    assert icicle.customdata[0][0] == -1  # the trace's tile opens no span


def test_span_detail_says_how_an_adjuster_changed_the_span() -> None:
    # Claude Code's shape (analysis.early_actions): the tool starts before the request's span ends and outlives it,
    # so the request is cut at the tool's start, and its detail says so; every adjustment has its words.
    assert set(ADJUSTMENTS) - {""} == set(ADJUSTMENT_NOTES)
    frame = spans_frame(
        [("turn", "", 0, 400 * MS), ("ask", "turn", 10 * MS, 190 * MS), ("tool", "turn", 190 * MS, 20 * MS)],
        service="claude-code",
    )
    frame = frame.with_columns(
        pl.Series("name", ["claude_code.interaction", "claude_code.llm_request", "claude_code.tool"]),
        pl.Series(
            "attributes",
            [{}, {"ttft_ms": "100", "gen_ai.system": "anthropic", "gen_ai.request.model": "m"}, {"tool_name": "Read"}],
            dtype=pl.Map(pl.String, pl.String),
        ),
    )
    view = build_trace_view("cd" * 16, frame, RULES)
    ask = view.spans["span_id"].to_list().index("ask")
    assert view.adjustment_name(ask) == "early_action"
    assert any("its caller acted on before the call's span ended" in text for text in texts(span_detail(view, ask)))
