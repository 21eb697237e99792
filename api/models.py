"""Response models of the REST API. Times are integers in nanoseconds since the Unix epoch (UTC)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    code: str = Field(description="Machine-readable error kind, e.g. `invalid_trace_id`, `not_found`.")
    message: str = Field(description="What was wrong, naming the field.")


class ErrorResponse(BaseModel):
    error: ErrorBody


class ServicesResponse(BaseModel):
    services: list[str]


class Operation(BaseModel):
    name: str
    span_kind: str = Field(description="`Server`, `Client`, `Producer`, `Consumer`, `Internal` or `Unspecified`.")


class OperationsResponse(BaseModel):
    operations: list[Operation]


class TraceSummary(BaseModel):
    trace_id: str = Field(description="32 lowercase hex characters.")
    root_service: str
    root_name: str
    start_time_unix_nano: int = Field(description="Earliest span start, ns since the Unix epoch.")
    duration_ns: int = Field(description="Latest span end minus earliest span start, ns.")
    span_count: int
    service_count: int
    error_count: int = Field(description="Spans with status `Error`.")
    hotspot_count: int = Field(description="Spans flagged `hotspan.hotspot=true` by the SDK HotspotSpanProcessor.")
    llm_calls: int | None = Field(None, description="Model calls the request made; null until the trace is analysed.")
    input_tokens: int | None = Field(None, description="Input tokens (cached included) over its generations.")
    output_tokens: int | None = Field(None, description="Output tokens (reasoning included) over its generations.")
    cached_input_tokens: int | None = Field(None, description="Input tokens served from a prompt cache.")
    reasoning_tokens: int | None = Field(None, description="Reasoning tokens.")
    cost: float | None = Field(
        None, description="Cost of its model calls in `currency` (price table); null when a model is not priced."
    )
    currency: str | None = Field(None, description="Currency of `cost`.")
    dominant_stage: str | None = Field(None, description="The stage with the most critical-path time.")


class TracesResponse(BaseModel):
    traces: list[TraceSummary]


class Event(BaseModel):
    time_unix_nano: int
    name: str
    attributes: dict[str, str]


class Link(BaseModel):
    trace_id: str
    span_id: str
    trace_state: str
    attributes: dict[str, str]


class SpanOut(BaseModel):
    trace_id: str
    span_id: str
    parent_span_id: str = Field(description="Empty for a root span.")
    name: str
    service_name: str
    kind: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    duration_ns: int
    status_code: str = Field(description="`Unset`, `Ok` or `Error`.")
    status_message: str
    trace_state: str
    scope_name: str
    scope_version: str
    attributes: dict[str, str] = Field(description="Values as stored: strings; arrays and maps as JSON.")
    resource_attributes: dict[str, str]
    events: list[Event]
    links: list[Link]


class TraceResponse(BaseModel):
    trace_id: str
    spans: list[SpanOut] = Field(description="This page's spans, by start time, then span ID; each span once.")
    span_count: int = Field(description="Spans of the whole trace.")
    next_page_token: str | None = Field(description="`page_token` of the next page; null on the last one.")
    truncated: bool = Field(description="True when this page is not the whole trace.")


class Health(BaseModel):
    status: str
    storage: str
    role: str = Field(description="What this process runs: all, collector, query or pipeline (hotspan.roles).")
    dead_letter_spans: int = Field(
        0,
        description="Spans the store refused although they passed every check, set aside in "
        "data_dir/ingest/dead-letter (importable with `hotspan import`); they do not make the status degraded, "
        "since other inserts succeed. 0 is the goal.",
    )


class AgentEdge(BaseModel):
    source_kind: str = Field(description="`agent`, or `service` for the service the request entered.")
    source: str
    target_kind: str = Field(description="`agent`, `model`, `tool` or `retrieval`.")
    target: str
    calls: int
    traces: int = Field(description="Traces the edge occurs in.")
    duration_ns: int = Field(description="The calls' summed durations, ns (overlapping where they ran in parallel).")
    critical_ns: int = Field(description="Their time on the trace's critical path, ns (everything below included).")
    errors: int = Field(description="Calls with status Error.")


class AgentGraphResponse(BaseModel):
    trace_id: str
    duration_ns: int = Field(description="First span start to last span end, ns.")
    edges: list[AgentEdge] = Field(description="Most summed duration first.")


class WindowAgentGraphResponse(BaseModel):
    traces: int = Field(description="Traces summed (the newest the search found, at most `limit`).")
    edges: list[AgentEdge] = Field(description="Most summed duration first; `critical_ns` on each request's path.")
