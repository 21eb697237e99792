"""Hand-built agent requests for the diagnosis tests, shaped like the instrumented stack's traces.

One request is gateway -> agent (``invoke_agent`` with an optional retrieval call, tool call and one or more
``chat`` calls) -> retriever / tools / vLLM, with the span names and attributes the stack and vLLM emit
(GenAI semconv, vLLM's ``llm_request`` with ``gen_ai.latency.*`` in seconds). :class:`Request` holds the knobs
a rule reads; :func:`build` lays the spans out on the time axis; :func:`frame` renders them in the reader's
shape and :func:`otlp_request` as an OTLP export request for ingestion through the collector.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import polars as pl
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from analysis.spans import ATTRIBUTES
from diagnosis import DiagnosisReport, EngineMetrics, Finding, diagnose_spans
from units import NS_PER_MS as MS

T0 = 1_790_000_000_000_000_000
"""Origin of every hand-built time: realistic epoch nanoseconds."""
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
KINDS = {"Internal": 1, "Server": 2, "Client": 3, "Producer": 4, "Consumer": 5}


@dataclass(frozen=True)
class SpanSpec:
    """One span; times are ns since the Unix epoch."""

    trace_id: str
    span_id: str
    parent: str
    name: str
    service: str
    kind: str
    start: int
    end: int
    attributes: Mapping[str, str] = field(default_factory=dict)
    instance: str = "proc-1"
    status: str = "Unset"


@dataclass(frozen=True)
class Chat:
    """One LLM call: engine phases in ms, tokens, the prompt (hashed into ``llm.prompt.sha256`` unless
    ``prompt_hashed`` is false), tokenizer and connection set-up, and the client's reaction time."""

    queue_ms: float = 0.2
    prefill_ms: float = 8.0
    decode_ms: float = 20.0
    prompt_tokens: int = 900
    completion_tokens: int = 40
    prompt: str = "question"
    prompt_hashed: bool = True
    conversation: str | None = None
    cached_tokens: int | None = None
    tokenize_ms: float = 0.6
    load_tokenizer_ms: float = 0.0
    tokenizer_worker: int = 0
    connect_ms: float = 0.0
    tls_ms: float = 0.0
    status: str = "Unset"
    response_lag_ms: float = 0.5
    """From the engine's end to the client parsing the answer: the event loop's reaction time."""


@dataclass(frozen=True)
class Request:
    """One user request; ``None`` leaves a step out. Durations in ms."""

    trace: int
    start_ms: float = 0.0
    retrieval_top_k: int | None = 4
    retrieval_ms: float = 1.0
    deserialize_ms: float = 0.05
    tool_ms: float | None = 20.0
    validate_ms: float = 0.05
    chats: tuple[Chat, ...] = (Chat(),)
    gateway_ms: float = 0.5
    agent_instance: str = "agent-1"
    conversation: str | None = None
    """``gen_ai.conversation.id`` on the ``invoke_agent`` span, where agents name it (pydantic-ai, the stack)."""


def ms(value: float) -> int:
    """Milliseconds as integer ns."""
    return round(value * MS)


class _Cursor:
    """Allocates span IDs within one trace and collects its spans; ``now`` is where the next step starts."""

    def __init__(self, trace_id: str, start: int) -> None:
        self.trace_id = trace_id
        self.now = start
        self.spans: list[SpanSpec] = []
        self._next = 0

    def reserve(self) -> str:
        """A fresh span ID, for a span recorded later (a parent whose end depends on its children)."""
        self._next += 1
        return f"{self._next:016x}"

    def span(
        self, parent: str, name: str, service: str, kind: str, start: int, end: int, span_id: str = "", **extra: object
    ) -> str:
        span_id = span_id or self.reserve()
        self.spans.append(SpanSpec(self.trace_id, span_id, parent, name, service, kind, start, end, **extra))  # type: ignore[arg-type]
        return span_id


def trace_id(number: int) -> str:
    """The 32-hex trace ID of request ``number``."""
    return f"{number + 1:032x}"


def build(request: Request) -> list[SpanSpec]:
    """The spans of ``request``, laid out one step after another."""
    c = _Cursor(trace_id(request.trace), T0 + ms(request.start_ms))
    agent = {"instance": request.agent_instance}
    root, gw_client, agent_server, invoke = (c.reserve() for _ in range(4))
    start = c.now
    agent_start = start + ms(request.gateway_ms) + ms(0.3)
    invoke_start = agent_start + ms(0.3)
    c.now = invoke_start + ms(0.05)
    c.span(invoke, "plan support-agent", "agent", "Internal", c.now, c.now + ms(0.02), **agent)
    c.now += ms(0.1)
    if request.retrieval_top_k is not None:
        _retrieval(c, invoke, request, agent)
    if request.tool_ms is not None:
        _tool(c, invoke, request, agent)
    for chat in request.chats:
        c.now = _chat(c, invoke, chat, agent) + ms(0.05)
    invoke_end = c.now + ms(0.05)
    agent_end = invoke_end + ms(0.3)
    gw_client_end = agent_end + ms(0.3)
    end = gw_client_end + ms(0.2)
    gateway = {"instance": "gw-1"}
    c.span("", "POST /v1/agent", "gateway", "Server", start, end, root, attributes={"tenant_id": "t"}, **gateway)
    c.span(
        root,
        "POST",
        "gateway",
        "Client",
        start + ms(request.gateway_ms),
        gw_client_end,
        gw_client,
        attributes={"http.method": "POST", "http.url": "http://127.0.0.1:9100/v1/invoke"},
        **gateway,
    )
    c.span(gw_client, "POST /v1/invoke", "agent", "Server", agent_start, agent_end, agent_server, **agent)
    c.span(
        agent_server,
        "invoke_agent support-agent",
        "agent",
        "Internal",
        invoke_start,
        invoke_end,
        invoke,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-agent"}
        | ({"gen_ai.conversation.id": request.conversation} if request.conversation else {}),
        **agent,
    )
    return c.spans


def _retrieval(c: _Cursor, invoke: str, request: Request, agent: dict[str, str]) -> None:
    """The agent's retriever call: CLIENT -> retriever SERVER -> retrieval -> vector search, deserialize."""
    call = c.now
    server = call + ms(0.5)
    inner = server + ms(0.2)
    search_end = inner + ms(request.retrieval_ms)
    deserialize_end = search_end + ms(request.deserialize_ms)
    server_end = deserialize_end + ms(0.3)
    call_end = server_end + ms(0.5)
    retriever = {"instance": "retr-1"}
    url = {"http.method": "POST", "http.url": "http://127.0.0.1:9101/v1/retrieve"}
    client = c.span(invoke, "POST", "agent", "Client", call, call_end, attributes=url, **agent)
    srv = c.span(client, "POST /v1/retrieve", "retriever", "Server", server, server_end, **retriever)
    top_k = str(request.retrieval_top_k)
    attributes = {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.top_k": top_k, "retrieval.top_k": top_k}
    retrieval = c.span(
        srv, "retrieval corpus", "retriever", "Internal", inner, deserialize_end, attributes=attributes, **retriever
    )
    c.span(
        retrieval,
        "vector_search corpus",
        "retriever",
        "Internal",
        inner,
        search_end,
        attributes={"retrieval.top_k": top_k},
        **retriever,
    )
    c.span(retrieval, "deserialize", "retriever", "Internal", search_end, deserialize_end, **retriever)
    c.now = call_end + ms(0.1)


def _tool(c: _Cursor, invoke: str, request: Request, agent: dict[str, str]) -> None:
    """``execute_tool``: argument validation, then the tool service call."""
    assert request.tool_ms is not None
    tool_start = c.now
    validate_end = tool_start + ms(0.02) + ms(request.validate_ms)
    call = validate_end + ms(0.05)
    server = call + ms(0.4)
    server_end = server + ms(request.tool_ms) + ms(0.2)
    call_end = server_end + ms(0.4)
    tools = {"instance": "tools-1"}
    tool = c.span(
        invoke,
        "execute_tool catalogue_lookup",
        "agent",
        "Internal",
        tool_start,
        call_end + ms(0.05),
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "catalogue_lookup"},
        **agent,
    )
    c.span(
        tool,
        "validate_tool_args",
        "agent",
        "Internal",
        tool_start + ms(0.02),
        validate_end,
        attributes={"gen_ai.tool.name": "catalogue_lookup", "tool.schemas_checked": "1"},
        **agent,
    )
    url = {"http.method": "POST", "http.url": "http://127.0.0.1:9102/v1/tools/catalogue_lookup"}
    client = c.span(tool, "POST", "agent", "Client", call, call_end, attributes=url, **agent)
    srv = c.span(client, "POST /v1/tools/{name}", "tools", "Server", server, server_end, **tools)
    c.span(srv, "tool catalogue_lookup", "tools", "Internal", server + ms(0.1), server_end - ms(0.1), **tools)
    c.now = call_end + ms(0.1)


def _chat(c: _Cursor, invoke: str, chat: Chat, agent: dict[str, str]) -> int:
    """Lay out one chat call from ``c.now``; returns its end."""
    start = c.now
    prompt_hash = hashlib.sha256(chat.prompt.encode()).hexdigest()[:16]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "vllm",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": str(chat.completion_tokens),
        "gen_ai.request.temperature": "0.7",
        "server.address": "127.0.0.1",
        "server.port": "9103",
        "gen_ai.usage.input_tokens": str(chat.prompt_tokens),
        "gen_ai.usage.output_tokens": str(chat.completion_tokens),
    }
    if chat.prompt_hashed:
        attributes["llm.prompt.sha256"] = prompt_hash
    if chat.conversation:
        attributes["gen_ai.conversation.id"] = chat.conversation
    tokenize_start = start + ms(0.03)
    load_end = tokenize_start + ms(0.02) + ms(chat.load_tokenizer_ms)
    tokenize_end = load_end + ms(chat.tokenize_ms)
    connect_start = tokenize_end + ms(0.05)
    connect_end = connect_start + ms(chat.connect_ms)
    tls_end = connect_end + ms(chat.tls_ms)
    arrival = tls_end + ms(0.6)
    e2e_ms = chat.queue_ms + chat.prefill_ms + chat.decode_ms
    engine_end = arrival + ms(e2e_ms)
    parse_start = engine_end + ms(chat.response_lag_ms)
    parse_end = parse_start + ms(0.05)
    end = parse_end + ms(0.05)
    chat_id = c.span(
        invoke, f"chat {MODEL}", "agent", "Client", start, end, attributes=attributes, status=chat.status, **agent
    )
    tokenize_id = c.span(
        chat_id,
        "tokenize",
        "agent",
        "Internal",
        tokenize_start,
        tokenize_end,
        attributes={"llm.prompt_tokens": str(chat.prompt_tokens), "llm.tokenizer.worker": str(chat.tokenizer_worker)},
        **agent,
    )
    if chat.load_tokenizer_ms:
        c.span(
            tokenize_id,
            "load_tokenizer",
            "agent",
            "Internal",
            tokenize_start + ms(0.01),
            load_end,
            attributes={"llm.tokenizer.worker": str(chat.tokenizer_worker)},
            **agent,
        )
    if chat.connect_ms:
        c.span(chat_id, "connect", "agent", "Internal", connect_start, connect_end, **agent)
    if chat.tls_ms:
        c.span(chat_id, "tls_handshake", "agent", "Internal", connect_end, tls_end, **agent)
    engine = {
        "gen_ai.latency.time_in_queue": f"{chat.queue_ms / 1e3:.9f}",
        "gen_ai.latency.time_in_model_prefill": f"{chat.prefill_ms / 1e3:.9f}",
        "gen_ai.latency.time_in_model_decode": f"{chat.decode_ms / 1e3:.9f}",
        "gen_ai.latency.time_to_first_token": f"{(chat.queue_ms + chat.prefill_ms) / 1e3:.9f}",
        "gen_ai.latency.e2e": f"{e2e_ms / 1e3:.9f}",
        "gen_ai.usage.prompt_tokens": str(chat.prompt_tokens),
        "gen_ai.usage.completion_tokens": str(chat.completion_tokens),
        "gen_ai.request.max_tokens": str(chat.completion_tokens),
        "gen_ai.response.finish_reasons": '["length"]',
    }
    if chat.cached_tokens is not None:
        engine["gen_ai.usage.cached_tokens"] = str(chat.cached_tokens)
    c.span(chat_id, "llm_request", "vllm", "Server", arrival, engine_end, attributes=engine, instance="vllm-1")
    c.span(chat_id, "parse_output", "agent", "Internal", parse_start, parse_end, **agent)
    return end


def build_all(requests: Iterable[Request]) -> list[SpanSpec]:
    """The spans of every request."""
    return [span for request in requests for span in build(request)]


def frame(spans: Iterable[SpanSpec]) -> pl.DataFrame:
    """A span frame in the reader's shape (attributes and resource attributes as Maps, status_code)."""
    rows = list(spans)
    return pl.DataFrame(
        {
            "trace_id": [s.trace_id for s in rows],
            "span_id": [s.span_id for s in rows],
            "parent_span_id": [s.parent for s in rows],
            "name": [s.name for s in rows],
            "service_name": [s.service for s in rows],
            "kind": [s.kind for s in rows],
            "start_time_unix_nano": [s.start for s in rows],
            "end_time_unix_nano": [s.end for s in rows],
            "status_code": [s.status for s in rows],
            "attributes": pl.Series([dict(s.attributes) for s in rows], dtype=ATTRIBUTES),
            "resource_attributes": pl.Series(
                [{"service.name": s.service, "service.instance.id": s.instance} for s in rows], dtype=ATTRIBUTES
            ),
        },
        schema_overrides={"start_time_unix_nano": pl.Int64, "end_time_unix_nano": pl.Int64},
    )


def otlp_request(spans: Iterable[SpanSpec]) -> ExportTraceServiceRequest:
    """The spans as one OTLP export request, one resource per (service, instance)."""
    by_resource: dict[tuple[str, str], list[SpanSpec]] = {}
    for span in spans:
        by_resource.setdefault((span.service, span.instance), []).append(span)
    request = ExportTraceServiceRequest()
    for (service, instance), members in by_resource.items():
        resource = Resource(attributes=[_kv("service.name", service), _kv("service.instance.id", instance)])
        scope = ScopeSpans(spans=[_otlp_span(s) for s in members])
        request.resource_spans.append(ResourceSpans(resource=resource, scope_spans=[scope]))
    return request


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _otlp_span(span: SpanSpec) -> Span:
    status = {"Unset": 0, "Ok": 1, "Error": 2}[span.status]
    return Span(
        trace_id=bytes.fromhex(span.trace_id),
        span_id=bytes.fromhex(span.span_id),
        parent_span_id=bytes.fromhex(span.parent) if span.parent else b"",
        name=span.name,
        kind=KINDS[span.kind],  # type: ignore[arg-type]
        start_time_unix_nano=span.start,
        end_time_unix_nano=span.end,
        attributes=[_kv(k, v) for k, v in span.attributes.items()],
        status=Status(code=status),  # type: ignore[arg-type]
    )


def clean_requests(count: int = 20, spacing_ms: float = 45.0, first_trace: int = 0) -> list[Request]:
    """A healthy window: requests overlapping two or three at a time, each worker of four loading its tokenizer
    once, two pooled connections opened at the start, distinct prompts, decode under half of the latency."""
    return [
        Request(
            trace=first_trace + i,
            start_ms=i * spacing_ms,
            chats=(
                Chat(
                    prompt=f"question {first_trace + i}",
                    tokenizer_worker=i % 4,
                    load_tokenizer_ms=6.0 if i < 4 else 0.0,
                    connect_ms=2.0 if i < 2 else 0.0,
                ),
            ),
        )
        for i in range(count)
    ]


def diagnose(spans: Iterable[SpanSpec], metrics: EngineMetrics | None = None) -> DiagnosisReport:
    """The packaged rules over ``spans``."""
    return diagnose_spans(frame(spans), metrics=metrics)


def by_cause(report: DiagnosisReport) -> dict[str, Finding]:
    """The report's findings keyed by cause."""
    return {finding.cause: finding for finding in report.findings}


def above_info(report: DiagnosisReport) -> list[str]:
    """Causes of the findings more severe than ``info``."""
    return [finding.cause for finding in report.findings if finding.severity != "info"]


def shifted(spans: Iterable[SpanSpec], traces: int = 0, ns: int = 0) -> list[SpanSpec]:
    """``spans`` as other requests: trace numbers moved by ``traces`` and times by ``ns``."""
    return [
        replace(span, trace_id=f"{int(span.trace_id, 16) + traces:032x}", start=span.start + ns, end=span.end + ns)
        for span in spans
    ]
