"""The tree adjusters the analysis applies before any view (analysis.wrappers, analysis.remote_spans), and the
LLM-call refinements of analysis.stages (the request carrying a call, the caller's preparation)."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest
from analysis_support import T0, S, by_span, frame

from analysis import request_summary, stage_breakdown, wall_clock_breakdown
from analysis.agent_graph import agent_graph
from analysis.stages import stage_pieces
from analysis.trace_analysis import analyze
from units import NS_PER_MS as MS


def breakdown_ns(spans: list[S]) -> dict[str, int]:
    return {row["stage"]: row["duration_ns"] for row in stage_breakdown(frame(spans)).iter_rows(named=True)}


def breakdown(spans: list[S]) -> dict[str, int]:
    return {stage: duration // MS for stage, duration in breakdown_ns(spans).items()}


def adjustments(spans: list[S]) -> dict[str, tuple[str, str]]:
    tree = analyze(frame(spans)).tree.frame()
    return {
        row["span_id"]: (row["adjustment"], row["analysis_parent_span_id"])
        for row in tree.iter_rows(named=True)
        if row["adjustment"]
    }


def genai_wrapper_trace() -> list[S]:
    # The shape of Jaeger UI's GenAI fixture, in ms: the gateway's resolver span q runs a childless
    # graphql.execution wrapper g [1, 96] beside the agent's invoke_agent subtree a [2, 96] (another service),
    # both overflowing q [0, 95]. The agent calls a hosted model (chat + its HTTP request) and a tool.
    return [
        S("edge", "", 0, 100 * MS, "POST /api/graphql", "api-edge", "Server"),
        S("q", "edge", 0, 95 * MS, "Query.assistantReply", "graphql-gateway", "Server"),
        S("g", "q", 1 * MS, 96 * MS, "graphql.execution", "graphql-gateway", "Internal"),
        S(
            "a",
            "q",
            2 * MS,
            96 * MS,
            "invoke_agent triage",
            "agent",
            "Server",
            {"gen_ai.operation.name": "invoke_agent"},
        ),
        S("chat", "a", 10 * MS, 60 * MS, "chat m", "agent", "Client", {"gen_ai.operation.name": "chat"}),
        S("http", "chat", 12 * MS, 59 * MS, "POST /v1/messages", "agent", "Client", {"http.request.method": "POST"}),
        S(
            "tool",
            "a",
            61 * MS,
            90 * MS,
            "execute_tool list",
            "agent",
            attributes={"gen_ai.operation.name": "execute_tool"},
        ),
    ]


def test_a_childless_wrapper_adopts_the_sibling_subtree_it_contains() -> None:
    spans = genai_wrapper_trace()
    assert adjustments(spans) == {"a": ("wrapped", "g")}
    # Critical path: edge [95,100]; q [0,1]; g [1,2]; a [2,10] [60,61] [90,95] (cut to q); chat [10,12] is the
    # caller's preparation (agent), [59,60] the call; http [12,59] carries it; tool [61,90].
    # Without the adjuster g took [1,95] whole: 94 % gateway.
    assert breakdown(spans) == {"gateway": 2, "agent": 16, "tool": 29, "llm.call": 48, "other": 5}
    wall = {row["stage"]: row["duration_ns"] / MS for row in wall_clock_breakdown(frame(spans)).iter_rows(named=True)}
    assert wall == pytest.approx(breakdown(spans))


def test_a_server_span_that_outlives_its_caller_goes_under_the_wrapper_that_waited_for_it() -> None:
    # The resolver returns at 1 ms, when the wrapper starts (a handler that answered before its work ran): the agent
    # no longer fits in it and is lifted, not under the edge, where the wrapper, extended past the agent, would end
    # last and take its 95 ms as gateway, but under the wrapper that covers it, as in the unbroken trace.
    spans = genai_wrapper_trace()
    spans[1] = replace(spans[1], end=1 * MS)
    assert adjustments(spans)["a"] == ("lifted", "g")
    assert breakdown(spans) == {"gateway": 2, "agent": 17, "tool": 29, "llm.call": 48, "other": 4}


def test_work_is_never_a_wrapper() -> None:
    # A childless hosted LLM call running beside a retrieval subtree keeps its time: it is work, not a wrapper.
    spans = [
        S("r", "", 0, 100 * MS, "handle", "app", "Server"),
        S("chat", "r", 0, 100 * MS, "chat m", "app", "Client", {"gen_ai.operation.name": "chat"}),
        S("ret", "r", 10 * MS, 50 * MS, "retrieve", "app", attributes={"gen_ai.operation.name": "retrieval"}),
        S("db", "ret", 11 * MS, 49 * MS, "search", "app", "Client", {"db.system": "qdrant"}),
    ]
    assert adjustments(spans) == {}
    assert breakdown(spans) == {"llm.call": 100}


def test_a_detached_llm_call_adopts_the_request_that_carries_it() -> None:
    # LangChain's callback span and the SDK's HTTP request (with vLLM's span below it) are siblings under the
    # graph node, as OpenLLMetry's LangChain instrumentation leaves them (tests/realworld).
    engine = {
        "gen_ai.latency.time_in_queue": "0.01",
        "gen_ai.latency.time_in_model_prefill": "0.02",
        "gen_ai.latency.time_in_model_decode": "0.05",
        "gen_ai.latency.time_to_first_token": "0.03",
    }
    spans = [
        S("node", "", 0, 100 * MS, "execute_task agent", "app"),
        S("lc", "node", 5 * MS, 95 * MS, "ChatOpenAI.chat", "app", "Client", {"llm.request.type": "chat"}),
        S("post", "node", 10 * MS, 92 * MS, "POST", "app", "Client", {"url.full": "http://m/v1/chat/completions"}),
        S("eng", "post", 11 * MS, 91 * MS, "llm_request", "vllm", "Server", engine),
    ]
    assert adjustments(spans) == {"post": ("wrapped", "lc")}
    stages = breakdown(spans)
    # node [0,5] [95,100] calls a model of its own service (agent); lc [5,10] prepares the call (agent); post
    # carries the traced call: [10,11] and [91,92] llm.call, as lc [92,95]; the engine [11,91]: queue 10,
    # prefill 20, decode 50.
    assert stages == {"agent": 15, "llm.queue": 10, "llm.prefill": 20, "llm.decode": 50, "llm.call": 5}


def streamed_call(engine_start: int) -> list[S]:
    """A streamed chat: the HTTP client span ends when the headers arrive (12 ms), vLLM's 76 ms ``llm_request``
    starts at ``engine_start`` (ns), and the caller's chat span lasts until the last chunk (90 ms)."""
    engine = {
        "gen_ai.latency.time_in_queue": "0.005",
        "gen_ai.latency.time_in_model_prefill": "0.015",
        "gen_ai.latency.time_in_model_decode": "0.056",
        "gen_ai.latency.time_to_first_token": "0.02",
    }
    return [
        S("chat", "", 0, 90 * MS, "chat m", "app", "Client", {"gen_ai.operation.name": "chat"}),
        S("post", "chat", 2 * MS, 12 * MS, "POST", "app", "Client", {"url.full": "http://m/v1/chat/completions"}),
        S("eng", "post", engine_start, engine_start + 76 * MS, "llm_request", "vllm", "Server", engine),
    ]


STREAMED_STAGES = {"agent": 2, "llm.call": 12, "llm.queue": 5, "llm.prefill": 15, "llm.decode": 56}


def test_a_streamed_engine_span_is_lifted_out_of_the_http_span_that_ended_at_the_headers() -> None:
    # vLLM's llm_request starts as the POST ends and runs to 88 ms.
    spans = streamed_call(12 * MS)
    assert adjustments(spans) == {"eng": ("lifted", "chat")}
    # Jaeger UI's rule would drop eng (it starts at its parent's end) and show no phase at all.
    assert breakdown(spans) == STREAMED_STAGES


def test_a_streamed_engine_span_off_by_seconds_starts_with_its_http_span() -> None:
    # The same call with vLLM's clock 5 s ahead: no span of the caller holds the engine's 76 ms, and it is longer
    # than the POST, so it cannot be centred there. Started with the POST (Jaeger's placement of a child longer
    # than its parent), its phases are the call's again; left where it was, the request ran 5 s.
    spans = streamed_call(5_012 * MS)
    assert adjustments(spans)["eng"] == ("shifted", "post")
    assert breakdown(spans) == STREAMED_STAGES


def test_a_logfire_stream_log_ends_its_call_where_the_stream_ended() -> None:
    # Logfire's shape: the call's span ends when the SDK returns the stream (20 ms); the zero-length log at 90 ms
    # says the stream took 60 ms, read from 20 to 80; the 10 ms before the log assembled the response.
    chat = {"gen_ai.operation.name": "chat", "logfire.span_type": "span"}
    log = {"gen_ai.operation.name": "chat", "logfire.span_type": "log", "duration": "0.06"}
    spans = [
        S("agent", "", 0, 100 * MS, "support_agent", "app"),
        S("chat", "agent", 10 * MS, 20 * MS, "Chat Completion with 'm'", "app", "Client", chat),
        S("log", "agent", 90 * MS, 90 * MS, "streaming response from 'm' took 0.06s", "app", attributes=log),
    ]
    assert adjustments(spans) == {"chat": ("streamed", "agent"), "log": ("streamed", "chat")}
    assert breakdown(spans) == {"agent": 30, "llm.call": 70}


def spawned_turn() -> list[S]:
    # Codex's shape: the app server answers turn/start in 20 ms; the turn it spawned (below the dispatch span,
    # which ended at the spawn) runs to 1000 ms: one model call [100, 900] and the agent's own time around it.
    return [
        S("rpc", "", 0, 20 * MS, "turn/start", "codex", "Server"),
        S("dispatch", "rpc", 5 * MS, 18 * MS, "op.dispatch.turn_input", "codex"),
        S("turn", "dispatch", 17 * MS, 1000 * MS, "session_task.turn", "codex"),
        S("chat", "turn", 100 * MS, 900 * MS, "chat m", "codex", "Client", {"gen_ai.operation.name": "chat"}),
    ]


def test_a_spawned_task_that_outlives_its_parent_is_the_requests_time() -> None:
    spans = spawned_turn()
    # The root ends 980 ms before its work does: it never ended, as the request's window goes (analysis.request_window).
    assert adjustments(spans) == {
        "rpc": ("enveloped", ""),
        "dispatch": ("extended", "rpc"),
        "turn": ("spawned", "dispatch"),
    }
    # Jaeger UI's rule would cut the turn at 18 ms and read the request as its 20 ms answer, no model time.
    assert breakdown(spans) == {"agent": 200, "llm.call": 800}
    wall = wall_clock_breakdown(frame(spans))
    assert {row["stage"]: round(row["duration_ns"] / MS) for row in wall.iter_rows(named=True)} == {
        "agent": 200,
        "llm.call": 800,
    }


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"end": 30 * MS}, id="by less than its parent lasted"),
        pytest.param({"service": "worker"}, id="of another service"),
        pytest.param({"kind": "Server"}, id="a server span"),
        pytest.param({"kind": "Client", "attributes": {"gen_ai.operation.name": "chat"}}, id="a model call"),
    ],
)
def test_any_child_that_outlives_its_parent_keeps_its_whole_time(change: dict[str, object]) -> None:
    # Whatever its kind, service or overhang, and with no model call below it: the turn [17, 30] or [17, 1000]
    # outlives dispatch [5, 18] and is kept whole, its ancestors ending with it (issue 27's model-call invariant).
    inside = {"turn": change, "chat": {"start": 17 * MS, "end": 17 * MS + 500_000}}
    spans = [replace(span, **inside.get(span.span_id, {})) for span in spawned_turn()]
    adjusted = adjustments(spans)
    assert adjusted["turn"] == ("spawned", "dispatch") and adjusted["dispatch"] == ("extended", "rpc")
    tree = analyze(frame(spans)).tree
    turn = tree.spans["span_id"].to_list().index("turn")
    assert tree.clamped.end_ns[turn] == tree.end_ns[turn] and not tree.clamped.dropped[turn]
    assert sum(breakdown_ns(spans).values()) == tree.end_ns[turn] - T0


def test_a_child_ending_within_a_clock_tick_of_its_parent_stays_cut_to_it() -> None:
    # The OTel JS SDK's millisecond starts make a child seem to end up to 1 ms after its parent: rounding, not work.
    spans = [replace(span, end=18 * MS + 900_000) if span.span_id == "turn" else span for span in spawned_turn()]
    spans = [replace(span, start=17 * MS, end=17 * MS + 500_000) if span.span_id == "chat" else span for span in spans]
    assert adjustments(spans) == {}
    assert sum(breakdown_ns(spans).values()) == 20 * MS


def test_work_under_spans_sent_as_started_is_kept_however_short() -> None:
    # Two spans sent as started (0 ns) above a 1 ms tool: it starts at their end, so Jaeger UI's cut would drop it
    # whole rather than trim a clock tick's overhang; both end with it.
    spans = [
        S("r", "", 0, 10 * MS, "handle", kind="Server"),
        S("g", "r", 5 * MS, 5 * MS, "step"),
        S("p", "g", 5 * MS, 5 * MS, "step"),
        S("c", "p", 5 * MS, 6 * MS, "execute_tool x", attributes={"gen_ai.operation.name": "execute_tool"}),
    ]
    assert adjustments(spans) == {"g": ("extended", "r"), "p": ("extended", "g"), "c": ("spawned", "p")}
    assert breakdown_ns(spans)["tool"] == 1 * MS


def test_work_outliving_a_remote_call_extends_the_caller_too() -> None:
    # An IDE's 20 ms call to turn/start [0, 20] (another service, CLIENT) above the app server's span: the turn
    # outlives both, and every span above it, the remote caller's included, ends with it: the IDE waited for the
    # turn's events, and a call cut to its answer would drop the turn from the IDE's request.
    caller = [
        S("ide", "", 0, 30 * MS, "turn", "ide"),
        S("call", "ide", 0, 20 * MS, "POST turn/start", "ide", "Client", {"rpc.system": "jsonrpc"}),
    ]
    spans = caller + [replace(span, parent="call") if span.span_id == "rpc" else span for span in spawned_turn()]
    adjusted = {span: adjustment for span, (adjustment, _) in adjustments(spans).items()}
    assert adjusted["turn"] == "spawned"
    assert adjusted["call"] == adjusted["rpc"] == adjusted["dispatch"] == "extended"
    # The IDE's own root ends long before the turn: its window is the trace's envelope (analysis.request_window).
    assert adjusted["ide"] == "enveloped"
    assert breakdown(spans) == {"agent": 200, "llm.call": 800}


def test_a_task_without_a_model_call_is_the_requests_work_too() -> None:
    # The rule reads no stage: a turn that only runs tools, or plain work, outliving the span that spawned it is
    # as much the request's as one that calls a model.
    spans = [span for span in spawned_turn() if span.span_id != "chat"]
    assert adjustments(spans) == {
        "rpc": ("enveloped", ""),
        "dispatch": ("extended", "rpc"),
        "turn": ("spawned", "dispatch"),
    }
    assert breakdown(spans) == {"agent": 995, "other": 5}


def codex_sampling(usage: bool = True) -> list[S]:
    # try_run_sampling_request: the request to the model [0, 10] (ends at the headers), the stream read in a
    # sibling [10, 100] whose last event [70, 80] reports the usage; the tool the answer asked for runs [82, 95]
    # while the stream reader stays open.
    reported = {"gen_ai.usage.input_tokens": "100", "gen_ai.usage.output_tokens": "7"} if usage else {}
    return [
        S("try", "", 0, 100 * MS, "try_run_sampling_request", "codex"),
        S("req", "try", 0, 10 * MS, "model_client.stream_responses_api", "codex", attributes={"wire_api": "responses"}),
        S("read", "try", 10 * MS, 100 * MS, "receiving_stream", "codex"),
        S("ev1", "read", 10 * MS, 11 * MS, "handle_responses", "codex"),
        S("ev2", "read", 70 * MS, 80 * MS, "handle_responses", "codex", attributes=reported),
        S("tool", "try", 82 * MS, 95 * MS, "handle_tool_call", "codex"),
    ]


def test_an_engine_span_below_a_caller_of_another_kind_is_lifted_too() -> None:
    # Codex marks its HTTP request INTERNAL: a traced vLLM's llm_request [8, 90] joins the trace under it, and
    # outlives it (it ended at the headers, 10 ms), while the stream is read in a sibling. Kept under the request,
    # the request would end with the engine (analysis.spawned_tasks) and hide the reader's first 80 ms from the
    # critical path; lifted under the span that waited for both, it is the caller's streamed answer.
    engine = {
        "gen_ai.latency.time_in_queue": "0.002",
        "gen_ai.latency.time_in_model_prefill": "0.01",
        "gen_ai.latency.time_in_model_decode": "0.07",
        "gen_ai.latency.time_to_first_token": "0.012",
    }
    spans = [*codex_sampling(), S("eng", "req", 8 * MS, 90 * MS, "llm_request", "vllm", "Server", engine)]
    assert adjustments(spans) == {"eng": ("lifted", "try"), "tool": ("wrapped", "read")}
    assert breakdown(spans) == {"llm.call": 10, "llm.stream": 77, "tool": 13}


def test_a_duration_attribute_of_another_meaning_is_no_stream_log() -> None:
    # A span's "duration" in ns (or anything not seconds) must neither end a call nor break the analysis.
    spans = [
        S("agent", "", 0, 100 * MS, "support_agent", "app"),
        S("chat", "agent", 10 * MS, 20 * MS, "chat m", "app", "Client", {"gen_ai.operation.name": "chat"}),
        S("job", "agent", 30 * MS, 40 * MS, "job", "app", attributes={"duration": "12000000000"}),
        S(
            "nan",
            "agent",
            50 * MS,
            50 * MS,
            "x",
            "app",
            attributes={"gen_ai.operation.name": "chat", "duration": "nan"},
        ),
    ]
    assert sum(breakdown(spans).values()) == 100


def test_a_stream_reader_adopts_the_tool_run_after_its_last_event() -> None:
    spans = codex_sampling()
    assert adjustments(spans) == {"tool": ("wrapped", "read")}
    # Without the adoption the reader, which ends last, would give the tool's 13 ms to the stream.
    assert breakdown(spans) == {"llm.call": 10, "llm.stream": 77, "tool": 13}


def test_the_usage_reported_inside_a_stream_reader_is_its_calls() -> None:
    summary = request_summary(frame(codex_sampling())).row(0, named=True)
    assert (summary["llm_calls"], summary["input_tokens"], summary["output_tokens"]) == (1, 100, 7)
    assert request_summary(frame(codex_sampling(usage=False)))["input_tokens"].to_list() == [0]


def test_a_server_span_off_by_clock_skew_is_moved_into_its_client() -> None:
    # The tool server's clock runs 5 s ahead: its span lies after the whole request. It fits in its client span
    # (30 ms in 40 ms), so it is centred there, 5 ms from either end, with its child.
    spans = [
        S("r", "", 0, 100 * MS, "handle", "agent-svc", "Server"),
        S("cli", "r", 20 * MS, 60 * MS, "POST", "agent-svc", "Client", {"http.request.method": "POST"}),
        S("srv", "cli", 5_020 * MS, 5_050 * MS, "POST /tool", "tool-server", "Server"),
        S("db", "srv", 5_025 * MS, 5_045 * MS, "SELECT", "tool-server", "Client", {"db.system": "postgresql"}),
    ]
    assert adjustments(spans) == {"srv": ("shifted", "cli"), "db": ("shifted", "srv")}
    tree = analyze(frame(spans)).tree
    moved = {row["span_id"]: (row["start_time_unix_nano"] - T0) // MS for row in tree.spans.iter_rows(named=True)}
    assert (moved["srv"], moved["db"]) == (25, 30)
    # cli [20,25] [55,60] is the hop; srv [25,30] [50,55] the tool server; db [30,50] the database (tool).
    assert breakdown(spans) == {"network": 10, "agent": 60, "tool": 30}


def test_the_request_carrying_a_streamed_call_takes_its_first_token_split() -> None:
    # A hosted streamed call: the first token at 30 ms (OpenInference's first-token event), the HTTP span ends at
    # the headers (20 ms); the SDK prepares for 5 ms before sending.
    spans = [
        S("chat", "", 0, 100 * MS, "ChatCompletion", "app", "Internal", {"openinference.span.kind": "LLM"}),
        S("post", "chat", 5 * MS, 20 * MS, "POST", "app", "Client", {"http.request.method": "POST"}),
    ]
    with_event = frame(spans).with_columns(
        pl.Series("event_names", [["First Token Stream Event"], []], dtype=pl.List(pl.String)),
        pl.Series("event_times_unix_nano", [[T0 + 30 * MS], []], dtype=pl.List(pl.Int64)),
    )
    pieces = stage_pieces(with_event)
    by_piece = {(row["span_id"], row["stage"]): row["duration_ns"] // MS for row in pieces.iter_rows(named=True)}
    assert by_piece == {
        ("chat", "agent"): 5,
        ("chat", "llm.first_token"): 25,
        ("chat", "llm.stream"): 70,
        ("post", "llm.first_token"): 15,
    }
    stages = {row["stage"]: row["duration_ns"] // MS for row in stage_breakdown(with_event).iter_rows(named=True)}
    assert stages == {"agent": 5, "llm.first_token": 25, "llm.stream": 70}
    assert by_span(analyze(with_event).tree.frame(), "adjustment") == {"chat": "", "post": ""}


def test_a_server_span_trailing_its_callers_answer_stays_the_tool_calls_work() -> None:
    # The stack's tool server on a busy host: its 4.5 ms span starts inside the agent's POST and ends 2 ms after
    # it, 1.5 ms after execute_tool (the agent had its answer). Lifted, it would be a sibling of the tool call:
    # a call of its own in the agent graph. Its resource names the agent's host: one clock, so no skew.
    host = {"host.name": "box-1"}
    spans = [
        S(
            "r",
            "",
            0,
            100 * MS,
            "invoke_agent a",
            "agent",
            "Server",
            {"gen_ai.operation.name": "invoke_agent"},
            resource=host,
        ),
        S(
            "t",
            "r",
            40 * MS,
            46 * MS,
            "execute_tool x",
            "agent",
            attributes={"gen_ai.operation.name": "execute_tool"},
            resource=host,
        ),
        S(
            "cli",
            "t",
            41 * MS,
            45 * MS + 500_000,
            "POST",
            "agent",
            "Client",
            {"http.request.method": "POST"},
            resource=host,
        ),
        S("srv", "cli", 43 * MS, 47 * MS + 500_000, "POST /v1/tools/{name}", "tools", "Server", resource=host),
    ]
    assert adjustments(spans) == {"srv": ("spawned", "cli"), "cli": ("extended", "t"), "t": ("extended", "r")}
    # The POST's 2 ms before the server started are the network's. Lifted, the server's 4.5 ms were the tool stage
    # and execute_tool had no time on the critical path.
    assert breakdown_ns(spans) == {"network": 2 * MS, "agent": 92_500_000, "tool": 5_500_000}
    tools = agent_graph(analyze(frame(spans))).filter(pl.col("target_kind") == "tool")
    assert tools.select("target", "calls", "critical_ns").rows() == [("execute_tool x", 1, 7_500_000)]
    # Where no host is named it reads the same (the stack's own spans name none).
    unnamed = [replace(span, resource={}) for span in spans]
    assert adjustments(unnamed) == adjustments(spans) and breakdown_ns(unnamed) == breakdown_ns(spans)
    # On another host the same span is skew, as Jaeger reads it: centred in its client, it is still the tool call's
    # work, and nothing above it is extended.
    elsewhere = [
        *spans[:3],
        S(
            "srv",
            "cli",
            43 * MS,
            47 * MS + 500_000,
            "POST /v1/tools/{name}",
            "tools",
            "Server",
            resource={"host.name": "box-2"},
        ),
    ]
    assert adjustments(elsewhere) == {"srv": ("shifted", "cli")}
    tools = agent_graph(analyze(frame(elsewhere))).filter(pl.col("target_kind") == "tool")
    assert tools.select("target", "calls").rows() == [("execute_tool x", 1)]


def test_a_tool_servers_span_lifted_beside_its_call_is_still_that_call() -> None:
    # The same tool server on a host busier still: its span starts 0.5 ms before the agent's POST ends and runs
    # 6.5 ms past it, too little of it inside to be the POST's work, so it is lifted under the agent. It is still
    # the tool call that reports it: one call in the agent graph, not a second one named by the server's route
    # (seen once in a CI run, tests/api/test_usage_stack_api.py).
    spans = [
        S("r", "", 0, 100 * MS, "invoke_agent a", "agent", "Server", {"gen_ai.operation.name": "invoke_agent"}),
        S("t", "r", 40 * MS, 46 * MS, "execute_tool x", "agent", attributes={"gen_ai.operation.name": "execute_tool"}),
        S("cli", "t", 41 * MS, 45 * MS + 500_000, "POST", "agent", "Client", {"http.request.method": "POST"}),
        S("srv", "cli", 45 * MS, 52 * MS, "POST /v1/tools/{name}", "tools", "Server"),
    ]
    assert adjustments(spans)["srv"] == ("lifted", "r")
    tools = agent_graph(analyze(frame(spans))).filter(pl.col("target_kind") == "tool")
    assert tools.select("target", "calls").rows() == [("execute_tool x", 1)]


def test_a_server_span_starting_after_its_client_ended_is_shifted_however_small_the_skew() -> None:
    # Zipkin's ascend.json: the auth service's half of a shared span starts 5.1 ms after the gateway's half ended,
    # while the gateway's next call (to the content service) runs. No clock places a server's start after its
    # client had the answer, so it is skew. Lifted to the root, the auth service's 4 ms overlapped the content
    # call and left the critical path: the gateway's first 14 ms read as network only.
    http = {"http.request.method": "GET"}
    spans = [
        S("r", "", 0, 40 * MS, "get", "gateway", "Server"),
        S("cli", "r", 1 * MS, 15 * MS, "get", "gateway", "Client", http),
        S("srv", "cli", 20 * MS, 24 * MS, "auth", "auth-service", "Server"),
        S("db", "srv", 20 * MS, 22 * MS, "SELECT", "auth-service", "Client", {"db.system": "postgresql"}),
        S("cli2", "r", 16 * MS, 39 * MS, "get", "gateway", "Client", http),
        S("srv2", "cli2", 18 * MS, 37 * MS, "content", "content-service", "Server"),
    ]
    assert adjustments(spans) == {"srv": ("shifted", "cli"), "db": ("shifted", "srv")}
    # r [0,1] [15,16] [39,40]; cli [1,6] [10,15] and cli2 [16,18] [37,39] the hops; srv [6,8] the auth service,
    # db [8,10] its database; srv2 [18,37] the content service.
    stages = breakdown(spans)
    assert stages == {"network": 14, "other": 21, "tool": 2, "gateway": 3}
    later = [
        S("srv", "cli", 5_020 * MS, 5_024 * MS, "auth", "auth-service", "Server"),
        S("db", "srv", 5_020 * MS, 5_022 * MS, "SELECT", "auth-service", "Client", {"db.system": "postgresql"}),
    ]
    assert breakdown([*spans[:2], *later, *spans[4:]]) == stages
