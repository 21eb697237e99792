"""The stage rule table (analysis.stage_rules) and its application (analysis.stages)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from analysis_support import S, by_span, frame

from analysis.stage_rules import STAGES, StageRulesError, default_stage_rules, load_stage_rules, parse_stage_rules
from analysis.stages import assign_stages, stage_pieces

VLLM_LATENCIES = {
    "gen_ai.latency.time_in_queue": "0.01",
    "gen_ai.latency.time_in_model_prefill": "0.02",
    "gen_ai.latency.time_in_model_decode": "0.05",
    "gen_ai.latency.time_to_first_token": "0.031",
}

# One realistic span per stage, with the stage the default table must give it. Times only matter for
# has_children: "chat" wraps "llm_request" (a traced call: its own time is what the engine's spans leave
# unexplained, llm.call), "ask-hosted" has no engine
# span below it (an untraced call: LLM time, and so is the HTTP request carrying it), "stream-hosted" tells its
# first token (10 ns after its start), so it is split into llm.first_token and llm.stream.
REALISTIC = [
    (S("gw", "", 0, 1000, "POST /v1/agent", "gateway", "Server", {"http.request.method": "POST"}), "gateway"),
    (S("hop", "gw", 1, 999, "POST", "gateway", "Client", {"http.request.method": "POST"}), "network"),
    (S("tls", "hop", 2, 5, "tls.connect", "gateway"), "network"),
    (S("srv", "hop", 6, 998, "POST /v1/invoke", "agent", "Server", {"http.request.method": "POST"}), "agent"),
    (
        S("inv", "srv", 7, 997, "invoke_agent support", "agent", "Internal", {"gen_ai.operation.name": "invoke_agent"}),
        "agent",
    ),
    (S("plan", "inv", 8, 20, "plan support", "agent"), "agent"),
    (
        S("emb", "inv", 21, 30, "embeddings bge", "agent", "Client", {"gen_ai.operation.name": "embeddings"}),
        "retrieval",
    ),
    (S("vec", "inv", 31, 40, "search", "agent", "Client", {"db.system": "qdrant"}), "retrieval"),
    (S("rr", "inv", 41, 45, "rerank", "agent", "Internal", {"openinference.span.kind": "RERANKER"}), "retrieval"),
    (
        S(
            "tool",
            "inv",
            46,
            60,
            "execute_tool weather",
            "agent",
            "Internal",
            {"gen_ai.operation.name": "execute_tool"},
        ),
        "tool",
    ),
    (S("sql", "tool", 47, 59, "SELECT orders", "agent", "Client", {"db.system": "postgresql"}), "tool"),
    (S("chat", "inv", 61, 900, "chat llama", "agent", "Client", {"gen_ai.operation.name": "chat"}), "llm.call"),
    (S("api", "chat", 62, 899, "POST /v1/chat/completions", "vllm", "Server"), "llm.tokenize"),
    (S("tok", "api", 63, 70, "tokenize", "vllm"), "llm.tokenize"),
    (S("llm", "api", 71, 890, "llm_request", "vllm", "Server", VLLM_LATENCIES), "other"),
    (S("detok", "api", 891, 895, "detokenize", "vllm"), "llm.detokenize"),
    (S("pre", "inv", 901, 905, "prefill", "engine"), "llm.prefill"),
    (S("dec", "inv", 906, 910, "decode_step", "engine"), "llm.decode"),
    (S("q", "inv", 911, 915, "queue_wait", "engine"), "llm.queue"),
    (S("host", "inv", 916, 950, "ask-hosted", "agent", "Client", {"gen_ai.operation.name": "chat"}), "llm.call"),
    (S("hreq", "host", 917, 949, "POST", "agent", "Client", {"http.request.method": "POST"}), "llm.call"),
    (
        S(
            "strm",
            "inv",
            916,
            950,
            "stream-hosted",
            "agent",
            "Client",
            {"gen_ai.operation.name": "chat", "gen_ai.response.time_to_first_chunk": "0.00000001"},
        ),
        "llm.call",
    ),
    (S("parse", "inv", 951, 960, "JsonOutputParser", "agent"), "output_parsing"),
    (
        S("guard", "inv", 961, 965, "check", "agent", "Internal", {"openinference.span.kind": "GUARDRAIL"}),
        "output_parsing",
    ),
    (S("misc", "inv", 966, 970, "cache.lookup", "billing"), "other"),
    # No rule knows it, but it runs below the agent span of its own service: the agent loop's bookkeeping.
    (S("own", "inv", 966, 970, "persist_rollout_items", "agent"), "agent"),
    (S("tsrv", "inv", 971, 980, "POST /v1/tools/{name}", "tools", "Server", {"http.method": "POST"}), "tool"),
    (S("rsrv", "inv", 981, 990, "POST /v1/search", "retriever", "Server", {"http.method": "POST"}), "retrieval"),
]


def test_default_table_gives_each_realistic_span_its_stage() -> None:
    stages = assign_stages(frame(span for span, _ in REALISTIC))
    assert by_span(stages, "stage") == {span.span_id: stage for span, stage in REALISTIC}
    assert by_span(stages, "split")["llm"] is True
    assert stages["stage"].dtype == pl.Enum(STAGES)


def test_an_unknown_span_is_the_agents_only_when_an_agent_span_is_the_nearest_work_above_it() -> None:
    spans = [
        S("inv", "", 0, 100, "invoke_agent support", "app", attributes={"gen_ai.operation.name": "invoke_agent"}),
        S("save", "inv", 1, 5, "persist_rollout_items", "app"),
        S("chat", "inv", 10, 90, "chat m", "app", "Client", {"gen_ai.operation.name": "chat"}),
        S("retry", "chat", 11, 20, "retry_backoff", "app"),
        S("cache", "inv", 91, 95, "cache.lookup", "billing"),
    ]
    stages = by_span(assign_stages(frame(spans)), "stage")
    assert (stages["save"], stages["retry"], stages["cache"]) == ("agent", "other", "other")


def test_every_stage_of_the_taxonomy_is_reached() -> None:
    # llm_request's own rule stage is the fallback; its pieces carry the queue/prefill/decode phases.
    pieces = stage_pieces(frame(span for span, _ in REALISTIC))
    assert set(pieces["stage"].to_list()) == set(STAGES)


def test_first_matching_rule_wins() -> None:
    rules = parse_stage_rules(
        {
            "rules": [
                {"stage": "tool", "match": {"name": "fetch*", "kind": "Client"}},
                {"stage": "retrieval", "match": {"name": "fetch*"}},
                {"stage": "agent", "match": {"service": "AGENT-*"}},
            ]
        }
    )
    spans = frame(
        [
            S("a", "", 0, 9, "fetch docs", "x", "Client"),
            S("b", "a", 1, 2, "FETCH", "x"),
            S("c", "a", 3, 4, "z", "agent-1"),
        ]
    )
    stages = assign_stages(spans, rules)
    assert by_span(stages, "stage") == {"a": "tool", "b": "retrieval", "c": "agent"}
    assert by_span(stages, "rule_index") == {"a": 0, "b": 1, "c": 2}


def test_unmatched_spans_are_other_with_no_rule() -> None:
    rules = parse_stage_rules(
        {"step_stages": [], "rules": [{"stage": "tool", "match": {"name_regex": "^GET /v[0-9]+/"}}]}
    )
    stages = assign_stages(frame([S("a", "", 0, 9, "GET /v2/items"), S("b", "a", 1, 2, "GET /items")]), rules)
    assert by_span(stages, "stage") == {"a": "tool", "b": "other"}
    assert by_span(stages, "rule_index") == {"a": 0, "b": None}


def test_unmatched_spans_below_a_step_serve_it_and_callers_of_llm_calls_are_agents() -> None:
    # The servers a tool call reaches do the tool's work; an unmatched span of the service that makes an LLM call
    # is its caller (agent), but not a span of another service above it.
    spans = frame(
        [
            S("edge", "", 0, 100, "GET /", "edge", "Server"),
            S("app", "edge", 1, 99, "handle", "app", "Server"),
            S("tool", "app", 2, 40, "execute_tool lookup", "app", attributes={"gen_ai.operation.name": "execute_tool"}),
            S("auth", "tool", 3, 10, "GET /validate", "auth-service", "Server"),
            S("chat", "app", 41, 98, "chat m", "app", "Client", {"gen_ai.operation.name": "chat"}),
        ]
    )
    stages = by_span(assign_stages(spans), "stage")
    assert (stages["auth"], stages["app"], stages["edge"]) == ("tool", "agent", "other")


def test_attribute_globs_and_presence() -> None:
    rules = parse_stage_rules(
        {
            "step_stages": [],
            "rules": [
                {"stage": "retrieval", "match": {"attributes": {"db.system": ["qdrant", "mil*"]}}},
                {"stage": "tool", "match": {"attributes": {"db.system": "*"}}},
            ],
        }
    )
    spans = frame(
        [
            S("a", "", 0, 9, attributes={"db.system": "Milvus"}),
            S("b", "a", 1, 2, attributes={"db.system": "redis"}),
            S("c", "a", 3, 4, attributes={"db.system": ""}),
            S("d", "a", 5, 6),
        ]
    )
    assert by_span(assign_stages(spans, rules), "stage") == {"a": "retrieval", "b": "tool", "c": "tool", "d": "other"}


def test_user_file_with_defaults_appended(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("include_defaults: true\nrules:\n  - stage: tool\n    match: {name: 'plan *'}\n")
    rules = load_stage_rules(path)
    assert rules.rules[0].stage == "tool"
    assert rules.rules[1:] == default_stage_rules().rules
    stages = assign_stages(frame([S("a", "", 0, 9, "plan x"), S("b", "a", 1, 2, "tls.connect")]), rules)
    assert by_span(stages, "stage") == {"a": "tool", "b": "network"}


def test_user_file_alone_replaces_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - {stage: tool, match: {name: 'plan *'}}\n")
    assert len(load_stage_rules(path).rules) == 1


def test_every_problem_is_reported_at_once_with_its_key() -> None:
    document = {
        "version": 2,
        "rules": [
            {"stage": "tool", "match": {"name": "x"}},
            {"stage": "llm", "match": {"kind": ["Server", "server"]}},
            {"stage": "agent", "match": {}},
            {"stage": "tool", "match": {"name_regex": "(unclosed", "attributes": {"k": []}}, "color": "red"},
        ],
    }
    with pytest.raises(StageRulesError) as raised:
        parse_stage_rules(document, "user.yaml")
    keys = [issue.split(":")[0] for issue in raised.value.issues]
    assert keys == [
        "version",
        "rules[1].stage",
        "rules[1].match.kind[1]",
        "rules[2].match",
        "rules[3].match.name_regex",
        "rules[3].match.attributes.k",
        "rules[3].color",
    ]
    assert "user.yaml (7 error(s))" in str(raised.value)
    assert "a match needs at least one condition" in str(raised.value)


def test_unreadable_files_are_reported(tmp_path: Path) -> None:
    with pytest.raises(StageRulesError, match="cannot be read"):
        load_stage_rules(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("rules: [\n")
    with pytest.raises(StageRulesError, match=r"broken\.yaml"):
        load_stage_rules(broken)


def test_no_path_means_the_packaged_table() -> None:
    assert load_stage_rules() == default_stage_rules()
    assert default_stage_rules().rules[0].split == "vllm"
