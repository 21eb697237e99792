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


def test_a_declared_rule_beats_every_undeclared_rule_wherever_it_stands() -> None:
    rules = parse_stage_rules(
        {
            "rules": [
                {"stage": "llm.call", "split": "first_token", "match": {"name": "call_llm"}},
                {"stage": "tool", "declared": True, "match": {"attributes": {"kind": "tool"}}},
                {"stage": "agent", "declared": True, "match": {"attributes": {"kind": "*"}}},
            ]
        }
    )
    assert rules.precedence == [1, 2, 0]
    spans = frame(
        [
            S("a", "", 0, 9, "call_llm", attributes={"kind": "tool"}),
            S("b", "a", 1, 2, "call_llm", attributes={"kind": "chain"}),
            S("c", "a", 3, 4, "call_llm"),
        ]
    )
    stages = assign_stages(spans, rules)
    assert by_span(stages, "stage") == {"a": "tool", "b": "agent", "c": "llm.call"}
    assert by_span(stages, "rule_index") == {"a": 1, "b": 2, "c": 0}


@pytest.mark.parametrize(
    ("name", "attributes", "stage"),
    [
        # A specific declared kind beats the name rules above it in the default table ...
        ("parse_order", {"openinference.span.kind": "TOOL"}, "tool"),
        ("call_llm", {"openinference.span.kind": "AGENT"}, "agent"),
        ("tokenize_query", {"gen_ai.operation.name": "execute_tool"}, "tool"),
        ("ai.toolCall", {"langsmith.span.kind": "retriever"}, "retrieval"),
        ("call_llm", {"span_type": "Retrieval", "framework": "promptflow"}, "retrieval"),
        # ... a generic one does not: LangChain's output parsers are OpenInference CHAIN spans, OpenLLMetry tasks.
        ("StrOutputParser", {"openinference.span.kind": "CHAIN"}, "output_parsing"),
        ("PydanticOutputParser.task", {"traceloop.span.kind": "task"}, "output_parsing"),
        ("lookup_order", {"span_type": "Function", "framework": "promptflow"}, "agent"),
    ],
)
def test_the_kind_an_attribute_declares_beats_a_name_glob(name: str, attributes: dict[str, str], stage: str) -> None:
    stages = assign_stages(frame([S("a", "", 0, 9, name, attributes=attributes)]))
    assert by_span(stages, "stage") == {"a": stage}


LLM_DECLARATIONS = [
    ("ChatCompletion", {"openinference.span.kind": "LLM"}),
    ("chat gpt-4o", {"gen_ai.operation.name": "chat"}),
    ("openai_chat", {"span_type": "LLM", "framework": "promptflow"}),
]


@pytest.mark.parametrize(("name", "declaration"), LLM_DECLARATIONS)
def test_a_function_named_call_llm_around_a_declared_llm_call_is_its_caller(
    name: str, declaration: dict[str, str]
) -> None:
    # A user's own function named call_llm (traced without any kind, or as a plain Prompt Flow function) wraps
    # the real model call its instrumentation declares; the HTTP request below carries that call.
    spans = frame(
        [
            S("ask", "", 0, 100, "POST /ask", "app", "Server"),
            S("wrap", "ask", 1, 99, "call_llm", "app", attributes={"span_type": "Function", "framework": "promptflow"}),
            S("llm", "wrap", 5, 95, name, "app", "Client", declaration),
            S("http", "llm", 10, 90, "POST", "app", "Client", {"http.url": "http://m/v1/chat/completions"}),
        ]
    )
    stages = assign_stages(spans)
    assert by_span(stages, "stage") == {"ask": "agent", "wrap": "agent", "llm": "llm.call", "http": "llm.call"}
    assert by_span(stages, "llm_call") == {"ask": False, "wrap": False, "llm": True, "http": False}
    # Each span's whole interval: the wrapper's is the caller's, the call's the model's after its 5 ns of
    # preparation before the request carrying it.
    pieces = stage_pieces(spans).group_by("stage").agg(pl.col("duration_ns").sum())
    assert dict(pieces.iter_rows()) == {"agent": 100 + 98 + 5, "llm.call": 85 + 80}


def test_any_agents_call_llm_is_the_call_unless_the_frameworks_own_llm_span_is_below_it() -> None:
    # any-agent wraps the framework's model call in "call_llm {model}" (gen_ai.operation.name=call_llm).
    wrapper = {"gen_ai.operation.name": "call_llm", "gen_ai.request.model": "gpt-4o"}
    spans = frame(
        [
            S("alone", "", 0, 50, "call_llm gpt-4o", "app", attributes=wrapper),
            S("outer", "", 60, 100, "call_llm gpt-4o", "app", attributes=wrapper),
            S("inner", "outer", 61, 99, "ChatCompletion", "app", attributes={"openinference.span.kind": "LLM"}),
        ]
    )
    stages = assign_stages(spans)
    assert by_span(stages, "stage") == {"alone": "llm.call", "outer": "agent", "inner": "llm.call"}
    assert by_span(stages, "llm_call") == {"alone": True, "outer": False, "inner": True}


def test_a_name_matched_call_stays_a_call_without_a_declared_call_of_its_service_below_it() -> None:
    # call_llm around a bare HTTP request: the request carries it. call_llm around a declared call of another
    # service (an LLM service it calls): it is the client's call, the other service's span its server's.
    spans = frame(
        [
            S("bare", "", 0, 50, "call_llm", "app"),
            S("http", "bare", 5, 45, "POST", "app", "Client", {"http.url": "http://m/v1/chat/completions"}),
            S("remote", "", 60, 100, "call_llm", "app"),
            S("srv", "remote", 62, 98, "POST /generate", "llm-service", "Server"),
            S("chat", "srv", 63, 97, "chat m", "llm-service", "Client", {"gen_ai.operation.name": "chat"}),
        ]
    )
    stages = assign_stages(spans)
    assert by_span(stages, "llm_call") == {"bare": True, "http": False, "remote": False, "srv": False, "chat": True}
    assert by_span(stages, "stage")["bare"] == "llm.call"
    assert by_span(stages, "stage")["remote"] == "llm.call"


def test_inside_a_declared_call_a_name_matched_call_is_that_calls_work() -> None:
    # Logfire's MCP sampling: a chat call whose model is the MCP client's, reached by a sampling/createMessage
    # request; the spans between the two chat spans are the outer call's request, not its caller.
    chat = {"gen_ai.operation.name": "chat"}
    spans = frame(
        [
            S("outer", "", 0, 100, "chat mcp-sampling", "app", "Client", chat),
            S("req", "outer", 2, 98, "MCP request: sampling/createMessage", "app"),
            S("handle", "req", 3, 97, "MCP client handle request: sampling/createMessage", "app"),
            S("inner", "handle", 4, 96, "chat gpt-4o", "app", "Client", chat),
        ]
    )
    stages = by_span(assign_stages(spans), "stage")
    assert set(stages.values()) == {"llm.call"}


def _ddtrace(kind: str, function: str, **more: str) -> dict[str, str]:
    """The attributes ddtrace 4.16.0 exported over OTLP (OTEL_TRACES_EXPORTER=otlp) on an LLM Observability span."""
    declared = {"span.type": "llm", "gen_ai.operation.name": kind}
    return {**declared, "operation.name": function, "resource.name": kind, **more}


def test_ddtrace_llm_observability_spans_take_the_kind_they_declare() -> None:
    # The shape ddtrace 4.16.0 exported for @workflow > @agent > @embedding, @retrieval, @llm, @tool, @task (the
    # OTLP span name is the kind), and Bedrock Agents' steps rebuilt by its integration.
    model = {"gen_ai.request.model": "llama", "gen_ai.provider.name": "vllm", "gen_ai.usage.input_tokens": "10"}
    spans = frame(
        [
            S("wf", "", 0, 200, "workflow", "app", attributes=_ddtrace("workflow", "handle")),
            S("ag", "wf", 1, 199, "agent", "app", attributes=_ddtrace("agent", "support_agent")),
            S("emb", "ag", 2, 5, "embedding", "app", attributes=_ddtrace("embedding", "embed")),
            S("ret", "ag", 6, 10, "retrieval", "app", attributes=_ddtrace("retrieval", "search")),
            S("llm", "ag", 11, 60, "llm", "app", attributes=_ddtrace("llm", "call_llm", **model)),
            S("tool", "ag", 61, 70, "tool", "app", attributes=_ddtrace("tool", "lookup_order")),
            S("task", "ag", 71, 72, "task", "app", attributes=_ddtrace("task", "parse_output")),
            S("oai", "ag", 73, 120, "openai.request", "app", "Client", {"_dd.llmobs.span_kind": "llm", **model}),
            S("bed", "ag", 121, 198, "Bedrock Agent A1", "app", attributes=_ddtrace("agent", "Bedrock Agent A1")),
            S("step", "bed", 122, 197, "orchestrationTrace Step", "app", attributes=_ddtrace("workflow", "step")),
            S("inv", "step", 123, 150, "modelInvocation", "app", attributes=_ddtrace("llm", "modelInvocation")),
            S("why", "step", 151, 152, "reasoning", "app", attributes=_ddtrace("task", "reasoning")),
            S("grp", "step", 153, 190, "OrderActions", "app", attributes=_ddtrace("tool", "OrderActions")),
        ]
    )
    stages = assign_stages(spans)
    assert by_span(stages, "stage") == {
        "wf": "agent",
        "ag": "agent",
        "emb": "retrieval",
        "ret": "retrieval",
        "llm": "llm.call",
        "tool": "tool",
        # A @task is generic orchestration; its function's name is in operation.name, not the span's name.
        "task": "agent",
        "oai": "llm.call",
        "bed": "agent",
        "step": "agent",
        "inv": "llm.call",
        "why": "agent",
        "grp": "tool",
    }


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
