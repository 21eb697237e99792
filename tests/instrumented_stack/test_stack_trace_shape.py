"""Trace shape of the stack: one trace per user request, gateway -> agent -> LLM client -> llm_request."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.runner import RunSummary
from instrumented_stack.workload import load_azure_trace

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _service(span: ReadableSpan) -> str:
    return str(span.resource.attributes["service.name"])


def _only(spans: list[ReadableSpan], service: str, kind: SpanKind, name_prefix: str) -> ReadableSpan:
    found = [s for s in spans if _service(s) == service and s.kind == kind and s.name.startswith(name_prefix)]
    assert len(found) == 1, f"one {service} {kind.name} span {name_prefix!r}* expected, got {found}"
    return found[0]


def _is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    return child.parent is not None and child.parent.span_id == parent.context.span_id


def test_every_request_succeeds_in_workload_order(stack_run: RunSummary) -> None:
    assert stack_run.errors == 0
    assert all(outcome.ok and outcome.trace_id for outcome in stack_run.outcomes)
    assert [outcome.workload for outcome in stack_run.outcomes] == load_azure_trace(limit=stack_run.requests)
    assert stack_run.p50_e2e_ms is not None and stack_run.p95_e2e_ms is not None
    assert 0 < stack_run.p50_e2e_ms <= stack_run.p95_e2e_ms


def test_one_trace_per_user_request(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    traces = stack_spans.traces()
    reported = {outcome.trace_id for outcome in stack_run.outcomes}
    assert len(reported) == stack_run.requests
    assert set(traces) == reported
    for trace_id, spans in traces.items():
        roots = [span for span in spans if span.parent is None]
        assert len(roots) == 1, trace_id
        assert (_service(roots[0]), roots[0].kind, roots[0].name) == (
            "gateway",
            SpanKind.SERVER,
            "POST /v1/agent",
        )


def test_each_service_reports_its_own_service_name(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    assert set(stack_spans.exporters) == {"gateway", "agent", "vllm"}
    for service in stack_spans.exporters:
        spans = stack_spans.spans(service)
        assert len(spans) >= stack_run.requests, service
        assert {_service(span) for span in spans} == {service}


def test_spans_nest_gateway_agent_llm_client_engine(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    for trace_id, spans in stack_spans.traces().items():
        gateway = _only(spans, "gateway", SpanKind.SERVER, "POST /v1/agent")
        gateway_call = _only(spans, "gateway", SpanKind.CLIENT, "POST")
        agent_server = _only(spans, "agent", SpanKind.SERVER, "POST /v1/invoke")
        invoke = _only(spans, "agent", SpanKind.INTERNAL, "invoke_agent ")
        plan = _only(spans, "agent", SpanKind.INTERNAL, "plan ")
        chat = _only(spans, "agent", SpanKind.CLIENT, "chat ")
        engine = _only(spans, "vllm", SpanKind.SERVER, "llm_request")
        assert len(spans) == 7, trace_id
        assert _is_child(gateway_call, gateway)
        assert _is_child(agent_server, gateway_call)
        assert _is_child(invoke, agent_server)
        assert _is_child(plan, invoke)
        assert _is_child(chat, invoke)
        assert _is_child(engine, chat), "llm_request must be the LLM client span's direct child"
        assert plan.end_time <= chat.start_time, "planning precedes the LLM call"


def test_agent_and_llm_client_spans_follow_genai_semconv(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
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
        assert chat.attributes["gen_ai.response.id"] == engine.attributes["gen_ai.request.id"]
        assert chat.start_time <= engine.start_time and engine.end_time <= chat.end_time


def test_baggage_reaches_the_agent_but_not_the_engine(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    tenant_by_trace = {outcome.trace_id: outcome.tenant_id for outcome in stack_run.outcomes}
    assert set(tenant_by_trace.values()) == {"tenant-a", "tenant-b"}
    for trace_id, spans in stack_spans.traces().items():
        gateway = _only(spans, "gateway", SpanKind.SERVER, "POST /v1/agent")
        invoke = _only(spans, "agent", SpanKind.INTERNAL, "invoke_agent ")
        engine = _only(spans, "vllm", SpanKind.SERVER, "llm_request")
        assert gateway.attributes["tenant_id"] == tenant_by_trace[trace_id]
        assert gateway.attributes["sample_policy"] == "debug-high"
        assert invoke.attributes["tenant_id"] == tenant_by_trace[trace_id]
        assert invoke.attributes["sample_policy"] == "debug-high"
        assert "tenant_id" not in engine.attributes
        assert "sample_policy" not in engine.attributes
