"""Shared by the Jaeger API tests: a served Hotspan holding the OpenTelemetry demo capture, the capture's spans
as the file has them, and Jaeger's JSON model written down independently of Hotspan's code.

The model (:class:`JaegerTrace` and friends) follows Jaeger's UI model (``internal/uimodel/model.go``: field
names, ``omitempty``, µs times, value types) and what Grafana's Jaeger data source reads from it
(``public/app/plugins/datasource/jaeger/types.ts``); it is strict: an unknown key, a wrong type or a value
that does not match its declared ``type`` fails validation.
"""

from __future__ import annotations

import functools
import json
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from collector.attributes import value_to_string
from hotspan.server import RunningServer, start_server
from hotspan.settings import load_settings
from testkit import post_otlp_json_file

TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "traces"
DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
KINDS = ["unspecified", "internal", "server", "client", "producer", "consumer"]


@pytest.fixture(scope="module")
def demo_server(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A served Hotspan (own database, no gRPC) holding the demo capture, posted line by line to /v1/traces
    as application/json; shared by one test module (the tests only read)."""
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("jaeger"),
        clickhouse_dsn=chdb_dsn,
        clickhouse_database=f"j_{uuid.uuid4().hex[:12]}",
        http_port=0,
        grpc_port=-1,
    )
    server = start_server(settings)
    post_otlp_json_file(server.base_url, DEMO)
    yield server
    server.stop()


def get(server: RunningServer, path: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{server.base_url}{path}", params=params, timeout=30)


def get_raw(server: RunningServer, path_and_query: str) -> httpx.Response:
    """GET a URL whose path and query are already encoded as a client encoded them (sent as is)."""
    return httpx.get(httpx.URL(f"{server.base_url}{path_and_query}"), timeout=30)


def angular_encode(value: str) -> str:
    """Grafana's ``encodeURIComponentAsAngularJS``: encodeURIComponent, then ``@ : $ , ;`` plain, space ``+``."""
    encoded = urllib.parse.quote(value, safe="-_.!~*'()")
    for escaped, plain in (("%40", "@"), ("%3A", ":"), ("%24", "$"), ("%2C", ","), ("%3B", ";"), ("%20", "+")):
        encoded = encoded.replace(escaped, plain)
    return encoded


def serialize_params(params: dict[str, Any]) -> str:
    """Grafana's ``urlUtil.serializeParams`` (keys in insertion order): how its Jaeger and Tempo data sources
    write a query string in the browser."""
    return "&".join(f"{angular_encode(key)}={angular_encode(str(value))}" for key, value in params.items())


@functools.cache
def demo_spans() -> list[dict[str, Any]]:
    """Every span of the capture as the file has it, plus ``service``, ``resource`` (the resource attribute
    list) and ``scope`` (the scope object). Cached: do not modify."""
    spans = []
    for line in DEMO.read_text().splitlines():
        if not line.strip():
            continue
        for rs in json.loads(line)["resourceSpans"]:
            attributes = rs["resource"].get("attributes", [])
            service = next(a["value"]["stringValue"] for a in attributes if a["key"] == "service.name")
            for ss in rs["scopeSpans"]:
                spans += [
                    dict(span, service=service, resource=attributes, scope=ss.get("scope", {})) for span in ss["spans"]
                ]
    return spans


def stored_text(any_value: dict[str, Any]) -> str:
    """The string Hotspan stores for an OTLP JSON ``AnyValue`` (the exporter's rule, collector.attributes)."""
    return value_to_string(json_format.ParseDict(any_value, AnyValue()))


def attribute_texts(span: dict[str, Any]) -> dict[str, str]:
    """A file span's attributes as the strings Hotspan stores."""
    return {a["key"]: stored_text(a["value"]) for a in span.get("attributes", [])}


def traces_with_span(predicate: Callable[[dict[str, Any]], bool]) -> set[str]:
    """IDs of the capture's traces having a span for which ``predicate`` holds (Jaeger's matching rule)."""
    return {span["traceId"] for span in demo_spans() if predicate(span)}


def duration_ns(span: dict[str, Any]) -> int:
    return int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])


def demo_window_us() -> tuple[int, int]:
    """µs bounds around every span start of the capture."""
    starts = [int(s["startTimeUnixNano"]) // 1000 for s in demo_spans()]
    return min(starts), max(starts) + 1


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


TraceID = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
SpanID = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]
NonNegative = Annotated[int, Field(ge=0)]


class JaegerKeyValue(Strict):
    key: str
    type: Literal["string", "bool", "int64", "float64", "binary"]
    value: str | bool | int | float

    @model_validator(mode="after")
    def value_matches_type(self) -> JaegerKeyValue:
        v = self.value
        ok = {
            "string": isinstance(v, str),
            "bool": isinstance(v, bool),
            # Jaeger writes int64 beyond ±(2^53-1) as a decimal string for JavaScript's sake.
            "int64": (isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**53)
            or (isinstance(v, str) and v.lstrip("-").isdigit() and abs(int(v)) >= 2**53),
            "float64": isinstance(v, float | int) and not isinstance(v, bool),
            "binary": isinstance(v, str),
        }[self.type]
        assert ok, f"tag {self.key}: value {v!r} is not of type {self.type}"
        return self


class JaegerReference(Strict):
    refType: Literal["CHILD_OF", "FOLLOWS_FROM"]
    traceID: TraceID
    spanID: SpanID


class JaegerLog(Strict):
    timestamp: NonNegative
    fields: list[JaegerKeyValue]


class JaegerSpan(Strict):
    traceID: TraceID
    spanID: SpanID
    parentSpanID: SpanID | None = None
    flags: NonNegative | None = None
    operationName: str
    references: list[JaegerReference]
    startTime: NonNegative
    duration: NonNegative
    tags: list[JaegerKeyValue]
    logs: list[JaegerLog]
    processID: str
    warnings: list[str] | None


class JaegerProcess(Strict):
    serviceName: str
    tags: list[JaegerKeyValue]


class JaegerTrace(Strict):
    traceID: TraceID
    spans: list[JaegerSpan] = Field(min_length=1)
    processes: dict[str, JaegerProcess]
    warnings: list[str] | None

    @model_validator(mode="after")
    def spans_belong(self) -> JaegerTrace:
        for span in self.spans:
            assert span.traceID == self.traceID, f"span {span.spanID} of trace {span.traceID} in {self.traceID}"
            assert span.processID in self.processes, f"span {span.spanID}: unknown process {span.processID}"
        return self


class JaegerError(Strict):
    code: int | None = None
    msg: str
    traceID: TraceID | None = None


class JaegerOperation(Strict):
    name: str
    spanKind: Literal["server", "client", "producer", "consumer", "internal", ""]


class JaegerDependency(Strict):
    parent: str
    child: str
    callCount: int = Field(ge=1)


T = TypeVar("T")


class JaegerEnvelope(Strict, Generic[T]):
    """``structuredResponse``: the five keys are always there."""

    data: T | None
    total: int
    limit: int
    offset: int
    errors: list[JaegerError] | None


def jaeger_error(response: httpx.Response, status: int) -> str:
    """Assert ``response`` is Jaeger v1's error envelope with HTTP ``status``; return its message."""
    assert response.status_code == status, response.text
    body = JaegerEnvelope[Any].model_validate(response.json())
    assert body.data is None and body.errors and body.errors[0].code == status
    return body.errors[0].msg


def v3_error(response: httpx.Response, status: int) -> str:
    """Assert ``response`` is Jaeger v3's (grpc-gateway) error body with HTTP ``status``; return its message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["httpCode"] == status, body
    return body["error"]["message"]
