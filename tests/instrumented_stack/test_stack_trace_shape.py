"""Trace shape: one trace per user request; gateway -> agent -> retriever / tools / LLM client -> llm_request."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.prompts import PromptBuilder
from instrumented_stack.summary import RunSummary
from instrumented_stack.tokenizer import default_tokenizer
from instrumented_stack.workload import load_azure_trace

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SERVICES = {"gateway", "agent", "retriever", "tools", "vllm"}


def _service(span: ReadableSpan) -> str:
    return str(span.resource.attributes["service.name"])


def _find(spans: list[ReadableSpan], service: str, kind: SpanKind, name_prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if _service(s) == service and s.kind == kind and s.name.startswith(name_prefix)]


def _only(spans: list[ReadableSpan], service: str, kind: SpanKind, name_prefix: str) -> ReadableSpan:
    found = _find(spans, service, kind, name_prefix)
    assert len(found) == 1, f"one {service} {kind.name} span {name_prefix!r}* expected, got {found}"
    return found[0]


def _is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    return child.parent is not None and child.parent.span_id == parent.context.span_id


def test_every_request_succeeds_in_workload_order(stack_run: RunSummary) -> None:
    assert stack_run.errors == 0
    assert all(outcome.ok and outcome.trace_id for outcome in stack_run.outcomes)
    assert [outcome.workload for outcome in stack_run.outcomes] == load_azure_trace(limit=stack_run.requests)
    assert {outcome.intent for outcome in stack_run.outcomes} >= {"chat", "catalogue"}
    assert stack_run.p50_e2e_ms is not None and stack_run.p99_e2e_ms is not None
    assert 0 < stack_run.p50_e2e_ms <= stack_run.p99_e2e_ms
    assert stack_run.ttft_p50_ms is not None and stack_run.ttft_p50_ms > 0


def test_one_trace_per_user_request(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    traces = stack_spans.traces()
    reported = {outcome.trace_id for outcome in stack_run.outcomes}
    assert len(reported) == stack_run.requests
    assert set(traces) == reported
    for trace_id, spans in traces.items():
        roots = [span for span in spans if span.parent is None]
        assert len(roots) == 1, trace_id
        assert (_service(roots[0]), roots[0].kind, roots[0].name) == ("gateway", SpanKind.SERVER, "POST /v1/agent")


def test_each_service_reports_its_own_service_name(stack_spans: InMemorySpans) -> None:
    assert set(stack_spans.exporters) == SERVICES
    for service in stack_spans.exporters:
        assert {_service(span) for span in stack_spans.spans(service)} == {service}


def test_spans_nest_gateway_agent_tools_retriever_llm(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    intent_by_trace = {outcome.trace_id: outcome.intent for outcome in stack_run.outcomes}
    for trace_id, spans in stack_spans.traces().items():
        gateway = _only(spans, "gateway", SpanKind.SERVER, "POST /v1/agent")
        admission = _only(spans, "gateway", SpanKind.INTERNAL, "admission ")
        gateway_call = _only(spans, "gateway", SpanKind.CLIENT, "POST")
        agent_server = _only(spans, "agent", SpanKind.SERVER, "POST /v1/invoke")
        invoke = _only(spans, "agent", SpanKind.INTERNAL, "invoke_agent ")
        plan = _only(spans, "agent", SpanKind.INTERNAL, "plan ")
        chat = _only(spans, "agent", SpanKind.CLIENT, "chat ")
        engine = _only(spans, "vllm", SpanKind.SERVER, "llm_request")
        assert _is_child(admission, gateway) and admission.end_time <= gateway_call.start_time
        assert _is_child(gateway_call, gateway)
        assert _is_child(agent_server, gateway_call)
        assert _is_child(invoke, agent_server)
        assert _is_child(plan, invoke) and _is_child(chat, invoke)
        assert _is_child(engine, chat), "llm_request must be the LLM client span's direct child"
        for name in ("tokenize", "parse_output"):
            assert _is_child(_only(spans, "agent", SpanKind.INTERNAL, name), chat), name
        assert plan.end_time <= chat.start_time, "planning precedes the LLM call"
        intent = intent_by_trace[trace_id]
        assert invoke.attributes["agent.intent"] == intent
        retriever = _find(spans, "retriever", SpanKind.SERVER, "POST /v1/retrieve")
        tools = _find(spans, "tools", SpanKind.SERVER, "POST /v1/tools")
        assert len(retriever) == (intent in ("policy", "catalogue")), intent
        assert len(tools) == (intent in ("catalogue", "calculate")), intent
        for server in retriever + tools:
            (call,) = [s for s in spans if _is_child(server, s)]
            assert _service(call) == "agent" and call.kind == SpanKind.CLIENT
            assert call.end_time <= chat.start_time, "tools and retrieval come before the answer"
        for tool_server in tools:
            call = next(s for s in spans if _is_child(tool_server, s))
            execute = next(s for s in spans if _is_child(call, s))
            assert execute.name.startswith("execute_tool ") and _is_child(execute, invoke)
            assert any(_is_child(s, execute) and s.name == "validate_tool_args" for s in spans)
        if retriever:
            retrieval = _only(spans, "retriever", SpanKind.INTERNAL, "retrieval ")
            assert _is_child(retrieval, retriever[0])
            for name in ("embeddings ", "vector_search ", "deserialize"):
                assert _is_child(_only(spans, "retriever", SpanKind.INTERNAL, name), retrieval), name


def test_spans_follow_genai_semconv(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    for spans in stack_spans.traces().values():
        invoke = _only(spans, "agent", SpanKind.INTERNAL, "invoke_agent ")
        assert invoke.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert invoke.name == f"invoke_agent {invoke.attributes['gen_ai.agent.name']}"
        chat = _only(spans, "agent", SpanKind.CLIENT, "chat ")
        engine = _only(spans, "vllm", SpanKind.SERVER, "llm_request")
        assert chat.name == f"chat {MODEL}"
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == MODEL
        usage = {key: chat.attributes[f"gen_ai.usage.{key}"] for key in ("input_tokens", "output_tokens")}
        assert usage == {
            "input_tokens": engine.attributes["gen_ai.usage.prompt_tokens"],
            "output_tokens": engine.attributes["gen_ai.usage.completion_tokens"],
        }
        # The engine's usage.prompt_tokens_details.cached_tokens, under semconv's name for it.
        assert 0 <= chat.attributes["gen_ai.usage.cache_read.input_tokens"] <= usage["input_tokens"]
        tokenize = _only(spans, "agent", SpanKind.INTERNAL, "tokenize")
        assert tokenize.attributes["llm.prompt_tokens"] == engine.attributes["gen_ai.usage.prompt_tokens"]
        assert chat.attributes["gen_ai.response.id"] == engine.attributes["gen_ai.request.id"]
        assert chat.start_time <= engine.start_time and engine.end_time <= chat.end_time
        for execute in _find(spans, "agent", SpanKind.INTERNAL, "execute_tool "):
            assert execute.attributes["gen_ai.operation.name"] == "execute_tool"
            assert execute.name == f"execute_tool {execute.attributes['gen_ai.tool.name']}"
        for retrieval in _find(spans, "retriever", SpanKind.INTERNAL, "retrieval "):
            assert retrieval.attributes["gen_ai.operation.name"] == "retrieval"
            assert retrieval.attributes["retrieval.top_k"] == 4
        for embeddings in _find(spans, "retriever", SpanKind.INTERNAL, "embeddings "):
            assert embeddings.attributes["gen_ai.operation.name"] == "embeddings"


def test_chat_prompts_keep_the_workload_token_counts(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    """A chat-intent request's LLM prompt is exactly the workload row's ContextTokens."""
    engine_by_trace = {
        format(span.context.trace_id, "032x"): span for span in stack_spans.spans("vllm") if span.name == "llm_request"
    }
    chats = [outcome for outcome in stack_run.outcomes if outcome.intent == "chat"]
    assert chats
    for outcome in stack_run.outcomes:
        tokens = engine_by_trace[outcome.trace_id].attributes["gen_ai.usage.prompt_tokens"]
        if outcome.intent == "chat":
            assert tokens == outcome.workload.prompt_tokens
        else:
            assert tokens > outcome.workload.prompt_tokens, "context and tool results are appended"
    builder = PromptBuilder(default_tokenizer(), 0)
    assert default_tokenizer().count(builder.build(chats[0].workload).prompt) == chats[0].workload.prompt_tokens


def test_baggage_reaches_the_agent_but_not_the_engine(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    tenant_by_trace = {outcome.trace_id: outcome.tenant_id for outcome in stack_run.outcomes}
    assert set(tenant_by_trace.values()) == {"tenant-a", "tenant-b"}
    for trace_id, spans in stack_spans.traces().items():
        gateway = _only(spans, "gateway", SpanKind.SERVER, "POST /v1/agent")
        invoke = _only(spans, "agent", SpanKind.INTERNAL, "invoke_agent ")
        engine = _only(spans, "vllm", SpanKind.SERVER, "llm_request")
        assert gateway.attributes["tenant_id"] == tenant_by_trace[trace_id]
        assert (
            gateway.attributes["gateway.priority_tier"]
            == {"tenant-a": "P1", "tenant-b": "P2"}[tenant_by_trace[trace_id]]
        )
        assert gateway.attributes["sample_policy"] == "debug-high"
        assert invoke.attributes["tenant_id"] == tenant_by_trace[trace_id]
        assert invoke.attributes["sample_policy"] == "debug-high"
        assert "tenant_id" not in engine.attributes
        assert "sample_policy" not in engine.attributes
        # hotspan_sdk's BaggageSpanProcessor copies baggage onto every span of the instrumented services,
        # not only the ones the stack's code decorates by hand.
        downstream = [span for span in spans if _service(span) in {"agent", "retriever", "tools"}]
        assert downstream
        assert {span.attributes.get("tenant_id") for span in downstream} == {tenant_by_trace[trace_id]}
