"""Stage decomposition in both views, request summaries and window percentiles (analysis.decomposition)."""

from __future__ import annotations

import time
from collections.abc import Callable

import polars as pl
import pytest
from analysis_support import S, frame

from analysis.decomposition import (
    STAGE_COLUMNS,
    compare_attributions,
    latency_percentiles,
    request_summary,
    span_attributions,
    stage_breakdown,
    stage_breakdown_wide,
    stage_percentiles,
    wall_clock_breakdown,
)
from analysis.stage_rules import STAGES, parse_stage_rules
from analysis.trace_analysis import analyze
from units import NS_PER_MS as MS


def ms(start: float, end: float) -> tuple[int, int]:
    return round(start * MS), round(end * MS)


def agent_request(trace_id: str = "t1") -> list[S]:
    """A request through gateway, agent and vLLM; times in ms (see the worked answer below)."""

    def span(
        span_id: str,
        parent: str,
        start: float,
        end: float,
        name: str,
        service: str,
        kind: str = "Internal",
        **attributes: str,
    ) -> S:
        return S(span_id, parent, *ms(start, end), name, service, kind, attributes, trace_id=trace_id)

    return [
        span("gw", "", 0, 1000, "POST /v1/agent", "gateway", "Server"),
        span("hop", "gw", 5, 995, "POST", "gateway", "Client", **{"http.request.method": "POST"}),
        span("srv", "hop", 10, 990, "POST /v1/invoke", "agent", "Server"),
        span(
            "inv",
            "srv",
            20,
            980,
            "invoke_agent support",
            "agent",
            **{"gen_ai.operation.name": "invoke_agent", "tenant_id": "acme"},
        ),
        span("plan", "inv", 30, 79, "plan support", "agent"),
        span("vec", "inv", 80, 200, "search", "agent", "Client", **{"db.system": "qdrant"}),
        span("ta", "inv", 201, 400, "execute_tool crm", "agent", **{"gen_ai.operation.name": "execute_tool"}),
        span("tb", "inv", 210, 300, "execute_tool web", "agent", **{"gen_ai.operation.name": "execute_tool"}),
        span(
            "chat",
            "inv",
            410,
            950,
            "chat llama",
            "agent",
            "Client",
            **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "llama"},
        ),
        span(
            "llm",
            "chat",
            420,
            940,
            "llm_request",
            "vllm",
            "Server",
            **{
                "gen_ai.latency.time_in_queue": "0.1",
                "gen_ai.latency.time_in_model_prefill": "0.05",
                "gen_ai.latency.time_in_model_decode": "0.36",
                "gen_ai.latency.time_to_first_token": "0.16",
                "gen_ai.usage.completion_tokens": "37",
            },
        ),
        span("parse", "inv", 955, 975, "parse_output", "agent"),
    ]


# Critical path of agent_request (ms): gw [0,5] [995,1000]; hop [5,10] [990,995]; srv [10,20] [980,990];
# inv walks parse (975) -> chat (950) -> ta (400) -> vec (200 < 201) -> plan (79 < 80): inv owns [975,980],
# [950,955], [400,410], [200,201], [79,80], [20,30] = 32; parse 20; chat [940,950] [410,420] = 20;
# llm [420,940] = 520, split at queued 430, scheduled 530, first token 580 (TTFT 160), last token 940;
# ta [201,400] = 199 (tb, parallel and finishing earlier, is off the path); vec 120; plan 49.
AGENT_REQUEST_STAGES_MS = {
    "gateway": 10,  # gw
    "network": 10,  # hop
    "agent": 101,  # srv 20 + inv 32 + plan 49
    "retrieval": 120,
    "tool": 199,
    "llm.tokenize": 10,
    "llm.queue": 100,
    "llm.prefill": 50,
    "llm.decode": 360,
    "llm.call": 20,  # chat: the LLM client span's own time around the engine span (traced_stage)
    "output_parsing": 20,
}


def test_critical_path_breakdown_of_an_agent_request() -> None:
    breakdown = stage_breakdown(frame(agent_request()))
    assert {row["stage"]: row["duration_ns"] for row in breakdown.iter_rows(named=True)} == {
        stage: value * MS for stage, value in AGENT_REQUEST_STAGES_MS.items()
    }
    assert breakdown["duration_ns"].sum() == 1000 * MS
    assert breakdown["stage"].to_list() == [s for s in STAGES if s in AGENT_REQUEST_STAGES_MS]


def test_wide_breakdown_with_the_request_summary() -> None:
    wide = stage_breakdown_wide(frame(agent_request()))
    (row,) = wide.to_dicts()
    assert {column: row[column] for column in STAGE_COLUMNS} == {
        f"{stage}_ns": AGENT_REQUEST_STAGES_MS.get(stage, 0) * MS for stage in STAGES
    }
    assert sum(row[column] for column in STAGE_COLUMNS) == row["duration_ns"] == 1000 * MS
    # TTFT of the only call, TPOT = 360 ms / (37 - 1) tokens = 10 ms.
    assert (row["root_service"], row["root_name"], row["tenant"], row["model"]) == (
        "gateway",
        "POST /v1/agent",
        "acme",
        "llama",
    )
    assert (row["span_count"], row["service_count"], row["llm_calls"], row["ttft_ns"]) == (11, 3, 1, 160 * MS)
    assert row["tpot_ns"] == pytest.approx(10 * MS)


def test_wall_clock_view_of_the_agent_request_sums_to_the_root() -> None:
    view = wall_clock_breakdown(frame(agent_request()))
    assert view["duration_ns"].sum() == pytest.approx(1000 * MS, abs=1)
    shares = {row["stage"]: row["duration_ns"] for row in view.iter_rows(named=True)}
    # vec [80,200] is the only span at depth 4 over that stretch in both views; ta and tb share [210,300].
    assert shares["retrieval"] == pytest.approx(120 * MS)
    assert shares["tool"] == pytest.approx(199 * MS)


def test_engine_span_outliving_its_client_is_kept_whole_and_split_into_its_phases() -> None:
    # chat [0,100] ms; llm_request [10,130] outlives it (no span above covers it, nor is it shorter, so
    # analysis.remote_spans leaves it): the request's work, so the chat, the root, ends with it (analysis.spawned_tasks)
    # rather than cutting it to [10,100] as Jaeger UI does. Phases: queue [10,30], prefill [30,50], decode [50,130].
    spans = frame(
        [
            S("chat", "", *ms(0, 100), "chat m", "agent", "Client", {"gen_ai.operation.name": "chat"}),
            S(
                "llm",
                "chat",
                *ms(10, 130),
                "llm_request",
                "vllm",
                "Server",
                {
                    "gen_ai.latency.time_in_queue": "0.02",
                    "gen_ai.latency.time_in_model_prefill": "0.02",
                    "gen_ai.latency.time_in_model_decode": "0.08",
                    "gen_ai.latency.time_to_first_token": "0.04",
                },
            ),
        ]
    )
    breakdown = {row["stage"]: row["duration_ns"] for row in stage_breakdown(spans).iter_rows(named=True)}
    assert breakdown == {"llm.call": 10 * MS, "llm.queue": 20 * MS, "llm.prefill": 20 * MS, "llm.decode": 80 * MS}


WRAPPER_RULES = parse_stage_rules(
    {
        "rules": [
            {"stage": "gateway", "match": {"name": "root"}},
            {"stage": "retrieval", "match": {"name": "work"}},
            {"stage": "tool", "match": {"name": "step *"}},
            {"stage": "agent", "match": {"name": "graphql.execution"}},
        ]
    }
)


def wrapper_trace() -> pl.DataFrame:
    # The overlapping sibling of analysis/wrappers.py: the work w [5,90] (children [10,49], [50,85]) and a
    # childless wrapper g graphql.execution [2,95] under the root r [0,100], the wrapper ending last.
    return frame(
        [
            S("r", "", 0, 100, "root"),
            S("w", "r", 5, 90, "work"),
            S("w1", "w", 10, 49, "step 1"),
            S("w2", "w", 50, 85, "step 2"),
            S("g", "r", 2, 95, "graphql.execution"),
        ]
    )


def test_the_wrapper_adopts_the_work_and_both_views_agree() -> None:
    # The childless wrapper g [2,95] contains the work w [5,90] (analysis.wrappers), so w is analysed as g's
    # child: r -> g -> w -> (w1, w2). Without it Jaeger's rule credited g with all of [2,95] (agent 93) and the
    # wall clock split [5,10] and [85,90] between g and w.
    # Critical path: r [0,2] [95,100] = 7 (gateway); g [2,5] [90,95] = 8 (agent); w [5,10] [49,50] [85,90] = 11
    # (retrieval); w1 [10,49] = 39 and w2 [50,85] = 35 (tool). The wall clock's deepest spans are the same.
    spans = wrapper_trace()
    path = {r["stage"]: r["duration_ns"] for r in stage_breakdown(spans, WRAPPER_RULES).iter_rows(named=True)}
    wall = {r["stage"]: r["duration_ns"] for r in wall_clock_breakdown(spans, WRAPPER_RULES).iter_rows(named=True)}
    assert path == {"gateway": 7, "agent": 8, "retrieval": 11, "tool": 74}
    assert wall == pytest.approx(path)
    assert not compare_attributions(spans, WRAPPER_RULES).filter("disagree").height


def test_the_two_views_disagree_on_parallel_children() -> None:
    # r [0,100] runs a [0,100] and b [0,50] at once. Critical path: a, the last to finish, takes all 100.
    # Wall clock: a and b share [0,50] (25 each), a alone [50,100] -> tool 75, retrieval 25.
    rules = parse_stage_rules(
        {"rules": [{"stage": "tool", "match": {"name": "a"}}, {"stage": "retrieval", "match": {"name": "b"}}]}
    )
    spans = frame([S("r", "", 0, 100, "r"), S("a", "r", 0, 100, "a"), S("b", "r", 0, 50, "b")])
    compared = compare_attributions(spans, rules, disagreement_share=0.1)
    rows = {r["stage"]: r for r in compared.iter_rows(named=True)}
    assert {stage: row["disagree"] for stage, row in rows.items()} == {"retrieval": True, "tool": True}
    assert rows["tool"]["difference_ns"] == pytest.approx(-25)
    assert rows["retrieval"]["difference_share"] == pytest.approx(0.25)


def test_per_span_attributions() -> None:
    per_span = span_attributions(wrapper_trace(), WRAPPER_RULES)
    rows = {r["span_id"]: r for r in per_span.iter_rows(named=True)}
    assert {s: (r["on_critical_path"], r["critical_path_ns"]) for s, r in rows.items()} == {
        "r": (True, 7),
        "g": (True, 8),
        "w": (True, 11),
        "w1": (True, 39),
        "w2": (True, 35),
    }
    assert {s: r["wall_clock_ns"] for s, r in rows.items()} == pytest.approx(
        {"r": 7, "g": 8, "w": 11, "w1": 39, "w2": 35}
    )
    assert rows["w"]["self_time_ns"] == 11
    assert rows["g"]["self_time_ns"] == 8
    assert rows["r"]["stage"] == "gateway"


def test_a_15000_deep_chain_decomposes_in_seconds() -> None:
    # s_i spans [i, 30000 - i]; the deepest span is the leaf, so the wall clock gives each span its two
    # 1 ns ends, like the critical path.
    depth = 15_000
    spans = frame(S(f"s{i}", f"s{i - 1}" if i else "", i, 2 * depth - i) for i in range(depth))
    started = time.perf_counter()
    analysis = analyze(spans)
    wide = stage_breakdown_wide(analysis)
    compared = compare_attributions(analysis)
    assert time.perf_counter() - started < 5
    assert wide["other_ns"].item() == wide["duration_ns"].item() == 2 * depth
    assert compared["wall_clock_ns"].item() == pytest.approx(2 * depth)
    assert not compared["disagree"].any()


def test_many_traces_at_once_equal_each_alone() -> None:
    together = stage_breakdown(frame([*agent_request("t1"), *agent_request("t2")[:6]]))
    alone = pl.concat([stage_breakdown(frame(agent_request("t1"))), stage_breakdown(frame(agent_request("t2")[:6]))])
    assert together.equals(alone)


def test_analysis_is_shared_between_views() -> None:
    analysis = analyze(frame(agent_request()))
    assert stage_breakdown(analysis).equals(stage_breakdown(frame(agent_request())))
    assert analyze(analysis) is analysis


def test_request_summary_over_several_llm_calls() -> None:
    # Two engine calls: TTFT is the earlier call's; TPOT = (90 + 40 ms) / ((10 - 1) + (5 - 1)) = 10 ms.
    def engine(span_id: str, start: float, decode: str, ttft: str, tokens: str) -> S:
        return S(
            span_id,
            "a",
            *ms(start, start + 200),
            "llm_request",
            "vllm",
            "Server",
            {
                "gen_ai.latency.time_in_model_decode": decode,
                "gen_ai.latency.time_to_first_token": ttft,
                "gen_ai.usage.completion_tokens": tokens,
            },
        )

    spans = frame(
        [
            S("a", "", *ms(0, 1000), "run", "agent"),
            engine("late", 500, "0.04", "0.02", "5"),
            engine("early", 100, "0.09", "0.03", "10"),
        ]
    )
    (row,) = request_summary(spans).to_dicts()
    assert (row["llm_calls"], row["ttft_ns"]) == (2, 30 * MS)
    assert row["tpot_ns"] == pytest.approx(10 * MS)
    assert (row["tenant"], row["model"], row["error_count"]) == (None, None, 0)


def test_stage_percentiles_and_shares() -> None:
    # Five requests of 100 ns: decode 10..50 ns, the rest other. Linear interpolation: p50 30, p95 48, p99 49.6.
    decode = [10, 20, 30, 40, 50]
    breakdowns = pl.DataFrame(
        {"root_service": ["gw"] * 5, "duration_ns": [100] * 5}
        | {column: [0] * 5 for column in STAGE_COLUMNS}
        | {"llm.decode_ns": decode, "other_ns": [100 - d for d in decode]}
    )
    result = stage_percentiles(breakdowns, group_by=["root_service"])
    assert result.height == len(STAGES)
    row = result.filter(pl.col("stage") == "llm.decode").to_dicts()[0]
    assert (row["requests"], row["p50_ns"], row["p95_ns"], row["p99_ns"], row["mean_ns"]) == pytest.approx(
        (5, 30, 48, 49.6, 30)
    )
    assert row["share"] == pytest.approx(0.3)
    assert result.filter(pl.col("stage") == "tool")["share"].item() == 0


def test_latency_percentiles_over_a_window() -> None:
    wide = stage_breakdown_wide(frame([*agent_request("t1"), *agent_request("t2")]))
    result = latency_percentiles(wide, group_by=["tenant"])
    assert result.select("tenant", "metric", "requests").rows() == [
        ("acme", "e2e", 2),
        ("acme", "ttft", 2),
        ("acme", "tpot", 2),
    ]
    assert result.filter(pl.col("metric") == "ttft")["p99_ns"].item() == pytest.approx(160 * MS)


@pytest.mark.parametrize(
    "view",
    [
        stage_breakdown,
        stage_breakdown_wide,
        wall_clock_breakdown,
        compare_attributions,
        span_attributions,
        request_summary,
    ],
)
def test_no_spans_give_empty_results(view: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    assert view(frame([S("a", "", 0, 10)]).head(0)).is_empty()
