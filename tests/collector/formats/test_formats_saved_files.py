"""Files people save traces in (testdata/README.md): the OpenTelemetry SDK's ConsoleSpanExporter output, arrays
of OTLP requests, Tempo's and Grafana's trace JSON, Langfuse observation exports; and the refusal of JSON in no
known format, which names what the file looks like.

The ConsoleSpanExporter converter is checked against the SDK itself: the same spans printed by ConsoleSpanExporter
and encoded by the OTLP exporter's own encoder must give the same OTLP spans.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from zipkin_kit import TESTDATA, attributes

from analysis import analyze
from analysis.model_calls import model_calls
from collector.formats import FormatError, Payload, Rejected, detect_format, langfuse, read_payloads
from collector.formats.console import concatenated_values
from collector.otlp_json import request_from_json
from hotspan.importer import StoreSink, import_paths
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter

TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "traces"
CONSOLE = TESTDATA / "otel-sdk-console.out"
CONSOLE_START_AND_END = TESTDATA / "otel-sdk-console-start-and-end.out"
TEMPO_BATCHES = TESTDATA / "tempo-batches-from-jaeger-example.json"
TEMPO_V2 = TESTDATA / "tempo-v2-from-jaeger-example.json"
LANGFUSE = TESTDATA / "langfuse-observations-v2.json"
US = 1000
MS = 1_000_000


def spans_of(path: Path) -> list[Span]:
    """Every span `read_payloads` hands on for `path` (its `Rejected` items left out), decoded as the collector
    decodes it, which rejects none."""
    spans = []
    for item in read_payloads(path):
        if isinstance(item, Rejected):
            continue
        request, rejections = request_from_json(item.body)
        assert rejections == []
        spans += [span for resource in request.resource_spans for scope in resource.scope_spans for span in scope.spans]
    return spans


def rejected_of(path: Path) -> list[Rejected]:
    return [item for item in read_payloads(path) if isinstance(item, Rejected)]


def json_spans_of(path: Path) -> list[dict[str, Any]]:
    """Every OTLP-JSON span of `path` with its resource's attributes added as `resource` (key → AnyValue)."""
    spans = []
    for item in read_payloads(path):
        if isinstance(item, Rejected):
            continue
        for resource_spans in item.body["resourceSpans"]:
            resource = {kv["key"]: kv["value"] for kv in resource_spans["resource"]["attributes"]}
            spans += [
                {**span, "resource": resource}
                for scope_spans in resource_spans["scopeSpans"]
                for span in scope_spans["spans"]
            ]
    return spans


# --- ConsoleSpanExporter ---------------------------------------------------------------------------------------


class PrintAtStart(SimpleSpanProcessor):
    """Exports a span when it starts as well as when it ends, as people do to see long spans early: the "printed
    at start and again at end" dumps of issue 27."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.span_exporter.export((span,))


def record_checkout(processor: Callable[[SpanExporter], SimpleSpanProcessor], exporter: SpanExporter) -> list:
    """Run a small checkout with the SDK: nested spans, events, a link, OK and ERROR statuses, attributes of
    every type, resource attributes. Returns the finished spans (ReadableSpan) in end order."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "checkout", "service.version": "1.4.2"}))
    provider.add_span_processor(processor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("shop.checkout", "0.3.0")
    with tracer.start_as_current_span("POST /checkout", kind=SpanKind.SERVER, attributes={"http.status": 200}) as root:
        with tracer.start_as_current_span("load cart", attributes={"ids": ["a1", "b2"], "ratio": 0.5}) as cart:
            cart.add_event("cache miss", {"cache.key": "cart:42", "hit": False})
        with tracer.start_as_current_span(
            "charge card", kind=SpanKind.CLIENT, links=[Link(root.get_span_context(), {"link.reason": "retry-of"})]
        ) as charge:
            charge.set_status(Status(StatusCode.ERROR, "card declined"))
        root.set_status(Status(StatusCode.OK))
    provider.shutdown()
    return list(memory.get_finished_spans())


def assert_same_spans(converted: list[Span], finished: list[ReadableSpan]) -> None:
    """The converted spans equal the OTLP exporter's encoding of `finished`, except times (ConsoleSpanExporter
    prints microseconds, from a float: within 1 µs) and the instrumentation scope (not printed)."""
    [resource_spans] = encode_spans(finished).resource_spans
    expected = {span.span_id: span for scope in resource_spans.scope_spans for span in scope.spans}
    assert {span.span_id for span in converted} == set(expected)
    for span in converted:
        oracle = expected[span.span_id]
        for field in ("trace_id", "parent_span_id", "name", "kind", "status", "attributes"):
            assert getattr(span, field) == getattr(oracle, field), field
        assert abs(span.start_time_unix_nano - oracle.start_time_unix_nano) < US
        assert abs(span.end_time_unix_nano - oracle.end_time_unix_nano) < US
        assert [(e.name, list(e.attributes)) for e in span.events] == [
            (e.name, list(e.attributes)) for e in oracle.events
        ]
        assert all(
            abs(a.time_unix_nano - b.time_unix_nano) < US for a, b in zip(span.events, oracle.events, strict=True)
        )
        assert [(k.trace_id, k.span_id, list(k.attributes)) for k in span.links] == [
            (k.trace_id, k.span_id, list(k.attributes)) for k in oracle.links
        ]


def console_dump(tmp_path: Path, processor: Callable[[SpanExporter], SimpleSpanProcessor], **options: Any) -> tuple:
    out = io.StringIO()
    finished = record_checkout(processor, ConsoleSpanExporter(out=out, **options))
    path = tmp_path / "console.out"
    path.write_text(out.getvalue())
    return path, finished


def test_console_dump_converts_to_what_the_otlp_exporter_sends(tmp_path: Path) -> None:
    path, finished = console_dump(tmp_path, SimpleSpanProcessor)

    assert detect_format(path) == "otel-console"
    assert_same_spans(spans_of(path), finished)


def test_console_dump_printed_at_start_and_at_end_keeps_the_ended_copy(tmp_path: Path) -> None:
    path, finished = console_dump(tmp_path, PrintAtStart)
    printed = [json.loads(block) for block in path.read_text().replace("}\n{", "}\0{").split("\0")]

    assert [span["end_time"] is None for span in printed] == [True, True, False, True, False, False]
    assert_same_spans(spans_of(path), finished)
    assert rejected_of(path) == []


def test_console_dump_one_line_per_span_is_read_alike(tmp_path: Path) -> None:
    path, finished = console_dump(
        tmp_path, SimpleSpanProcessor, formatter=lambda span: span.to_json(indent=None) + "\n"
    )

    assert detect_format(path) == "otel-console"
    assert_same_spans(spans_of(path), finished)


def test_console_span_never_printed_ended_is_rejected_by_line(tmp_path: Path) -> None:
    text = CONSOLE_START_AND_END.read_text()
    first_printed = text[: text.index("}\n{") + 2]  # "POST /checkout" printed at its start only
    path = tmp_path / "cut.out"
    path.write_text(first_printed + CONSOLE.read_text())

    [rejected] = rejected_of(path)

    assert rejected == Rejected(f"{path}:1", "printed only before it ended (end_time is null) and never again", 1)
    assert len(spans_of(path)) == 3


def test_console_dump_cut_short_keeps_what_came_before(tmp_path: Path) -> None:
    text = CONSOLE.read_text()
    third = text.index("}\n{", text.index("}\n{") + 1) + 2  # where the third printed span starts
    path = tmp_path / "cut.out"
    path.write_text(text[: third + 40])

    [rejected] = rejected_of(path)

    assert [span.name for span in spans_of(path)] == ["load cart", "charge card"]
    assert rejected.source == f"{path}:{text[: third + 40].count(chr(10)) + 1}"  # the line where JSON stops
    assert "the rest is not read" in rejected.reason and rejected.span_count is None


def test_concatenated_values_give_the_line_each_value_starts_on() -> None:
    text = '{"a": 1}\n\n{"b":\n 2} [3]\n  "x"\n'

    assert list(concatenated_values(text)) == [(1, {"a": 1}), (3, {"b": 2}), (4, [3]), (5, "x")]


def test_committed_console_dumps() -> None:
    # Both generated with opentelemetry-sdk 1.45.1 (testdata/README.md): three spans, the second file printing each
    # at start and at end.
    for path in (CONSOLE, CONSOLE_START_AND_END):
        spans = {span["name"]: span for span in json_spans_of(path)}
        root, cart, charge = spans["POST /checkout"], spans["load cart"], spans["charge card"]
        assert (root["kind"], cart["kind"], charge["kind"]) == (2, 1, 3)
        assert cart["parentSpanId"] == charge["parentSpanId"] == root["spanId"] and "parentSpanId" not in root
        assert charge["status"] == {"code": 2, "message": "card declined"} and root["status"] == {"code": 1}
        assert attributes(cart)["cart.ids"] == {
            "arrayValue": {"values": [{"stringValue": "a1"}, {"stringValue": "b2"}]}
        }
        assert attributes(charge)["payment.amount"] == {"doubleValue": 12.5}
        assert charge["links"][0]["spanId"] == root["spanId"]
        assert charge["events"][0]["name"] == "exception"
        assert root["resource"]["service.name"] == {"stringValue": "checkout"}


# --- OTLP arrays, Tempo, Grafana -------------------------------------------------------------------------------


def test_array_of_otlp_requests_is_one_payload_per_request(tmp_path: Path) -> None:
    names = ["otelproto__trace.json", "otlp2parquet__trace.json", "jaeger__otel_traces_01.json"]
    requests = [json.loads((TRACES / "otlp" / name).read_text()) for name in names]
    path = tmp_path / "requests.json"
    path.write_text(json.dumps([*requests, {"not": "a request"}]))

    items = list(read_payloads(path))

    assert detect_format(path) == "otlp-json-array"
    assert [item.body for item in items if isinstance(item, Payload)] == requests
    assert [item.source for item in items] == [f"{path}#/{index}" for index in range(4)]
    assert items[3] == Rejected(f"{path}#/3", "not an OTLP trace export request (no 'resourceSpans')", None)


def test_tempo_batches_file_with_base64_ids_and_kind_names() -> None:
    spans = json_spans_of(TEMPO_BATCHES)
    decoded = spans_of(TEMPO_BATCHES)

    assert detect_format(TEMPO_BATCHES) == "otlp-json"
    assert {base64.b64decode(span["traceId"]).hex() for span in spans} == {"00000000000000000000000000000011"}
    assert [span.span_id.hex()[-2:] for span in decoded] == ["04", "05", "03", "06", "07"]
    assert {span.trace_id.hex() for span in decoded} == {"00000000000000000000000000000011"}
    assert decoded[0].parent_span_id == base64.b64decode("AAAAAAAAAAc=")
    assert [span["kind"] for span in spans] == [*["SPAN_KIND_UNSPECIFIED"] * 3, "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT"]
    assert [span.kind for span in decoded] == [
        *[Span.SPAN_KIND_UNSPECIFIED] * 3,
        Span.SPAN_KIND_SERVER,
        Span.SPAN_KIND_CLIENT,
    ]
    assert [span["resource"]["service.name"]["stringValue"] for span in spans] == [
        "example-service-2",
        "example-service-3",
        *["example-service-1"] * 3,
    ]
    assert {
        attribute.key: attribute.value.int_value for attribute in decoded[4].attributes if attribute.value.int_value
    } == {"http.response.status_code": 200}
    assert decoded == spans_of(TEMPO_V2)  # the same spans as the v2 fixture, kind names and all


def tempo_variants(tmp_path: Path) -> dict[str, Path]:
    """Tempo's `/api/v2/traces/{id}` answer (the committed fixture), the same trace as `/api/traces/{id}` answers it
    (no envelope), and as Tempo 1.x and Grafana write it (`batches` of `instrumentationLibrarySpans`)."""
    answer = json.loads(TEMPO_V2.read_text())
    trace = answer["trace"]
    legacy = {
        "batches": [
            {
                "resource": resource["resource"],
                "instrumentationLibrarySpans": [
                    {"instrumentationLibrary": scope["scope"], "spans": scope["spans"]}
                    for scope in resource["scopeSpans"]
                ],
            }
            for resource in trace["resourceSpans"]
        ]
    }
    variants = {"v2": answer, "v1": trace, "batches": legacy, "v2-batches": {"trace": legacy, "metrics": {}}}
    paths = {}
    for name, document in variants.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(document))
    return paths


def test_tempo_answers_in_every_shape_give_the_same_spans(tmp_path: Path) -> None:
    trace_id = base64.b64decode("AAAAAAAAAAAAAAAAAAAAEQ==")
    # The chain 03 > 06 > 07 > 04 > 05 across the three services, in the file's order (04, 05, 03, 06, 07).
    parents = {"04": "07", "05": "04", "03": "", "06": "03", "07": "06"}

    shapes = {name: spans_of(path) for name, path in tempo_variants(tmp_path).items()}

    assert all(detect_format(path) == "otlp-json" for path in tempo_variants(tmp_path).values())
    for spans in shapes.values():
        assert spans == shapes["v2"]
    assert {span.trace_id for span in shapes["v2"]} == {trace_id}
    assert {span.span_id.hex()[-2:]: span.parent_span_id.hex()[-2:] for span in shapes["v2"]} == parents
    root = next(span for span in shapes["v2"] if span.span_id.hex() == "0000000000000003")
    assert len(root.events) == 2
    assert {attribute.key for attribute in root.events[0].attributes} == {"example.event", "example.count"}


# --- Langfuse --------------------------------------------------------------------------------------------------


def test_langfuse_fixture_is_an_observations_page_for_the_langfuse_sdk() -> None:
    page = parse_obj_as(ObservationsV2Response, json.loads(LANGFUSE.read_text()))

    assert [observation.type for observation in page.data] == ["AGENT", "GENERATION", "TOOL", "EVENT", "GENERATION"]


def test_langfuse_observations_convert_to_langfuse_sdk_spans() -> None:
    observations = json.loads(LANGFUSE.read_text())["data"]
    spans = {span["spanId"]: span for span in json_spans_of(LANGFUSE)}

    assert detect_format(LANGFUSE) == "langfuse"
    assert list(spans) == [observation["id"] for observation in observations]
    generation = spans["b1b2c3d4e5f60718"]
    assert attributes(generation) == {
        "langfuse.observation.type": {"stringValue": "generation"},
        "langfuse.observation.model.name": {"stringValue": "gpt-4o-mini"},
        "langfuse.observation.level": {"stringValue": "DEFAULT"},
        "langfuse.environment": {"stringValue": "production"},
        "langfuse.observation.model.parameters": {"stringValue": json.dumps(observations[1]["modelParameters"])},
        "langfuse.observation.usage_details": {"stringValue": json.dumps(observations[1]["usageDetails"])},
        "langfuse.observation.cost_details": {"stringValue": json.dumps(observations[1]["costDetails"])},
        "langfuse.observation.completion_start_time": {"stringValue": '"2026-12-04T15:00:00.645000Z"'},
    }
    assert (generation["traceId"], generation["parentSpanId"]) == (
        "5b1d0a7e3c9f4e2a8b6c4d2e1f0a9b8c",
        "a1b2c3d4e5f60718",
    )
    assert generation["resource"] == {"service.name": {"stringValue": "langfuse"}}
    assert spans["c1b2c3d4e5f60718"]["status"] == {"code": 2, "message": "order service timed out after 350 ms"}
    event = spans["d1b2c3d4e5f60718"]
    assert event["startTimeUnixNano"] == event["endTimeUnixNano"]
    assert "parentSpanId" not in spans["a1b2c3d4e5f60718"]


def test_langfuse_uuid_ids_hash_to_stable_otlp_ids_and_keep_the_original(tmp_path: Path) -> None:
    trace = {
        "id": "7f3c1b2a-5d4e-4f60-8a9b-0c1d2e3f4a5b",
        "name": "qa",
        "observations": [
            {
                "id": "obs-root",
                "type": "SPAN",
                "startTime": "2024-05-01T12:00:00.000Z",
                "endTime": "2024-05-01T12:00:02.000Z",
            },
            {
                "id": "obs-gen",
                "parentObservationId": "obs-root",
                "type": "GENERATION",
                "startTime": "2024-05-01T12:00:00.100Z",
                "endTime": "2024-05-01T12:00:01.900Z",
                "usage": {"input": 10, "output": 5, "total": 15, "unit": "TOKENS"},
            },
            {"id": "obs-open", "type": "SPAN", "startTime": "2024-05-01T12:00:01.000Z", "endTime": None},
        ],
    }
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))

    spans = json_spans_of(path)
    [rejected] = rejected_of(path)

    assert detect_format(path) == "langfuse"
    root, generation = spans
    assert root["traceId"] == generation["traceId"] and len(root["traceId"]) == 32
    assert generation["parentSpanId"] == root["spanId"]
    assert json_spans_of(path) == spans  # the same IDs on every read, so a re-import stores nothing twice
    assert attributes(root)["langfuse.observation.id"] == {"stringValue": "obs-root"}
    assert attributes(root)["langfuse.trace.id"] == {"stringValue": trace["id"]}
    assert attributes(generation)["langfuse.observation.usage_details"] == {
        "stringValue": json.dumps({"input": 10, "output": 5, "total": 15})
    }
    assert rejected == Rejected(f"{path}#/observations/2", "endTime is missing: this SPAN never ended", 1)


def test_langfuse_observation_list_is_not_taken_for_zipkin(tmp_path: Path) -> None:
    # Issue 27: id and traceId made a bare list of observations look like Zipkin v2, and every span was refused.
    path = tmp_path / "observations.json"
    path.write_text(json.dumps(json.loads(LANGFUSE.read_text())["data"]))

    assert langfuse.observations(json.loads(path.read_text())) is not None
    assert detect_format(path) == "langfuse"
    assert len(spans_of(path)) == 5


def test_a_file_whose_every_span_is_rejected_names_the_format_it_was_read_as(tmp_path: Path) -> None:
    path = tmp_path / "observations.json"
    path.write_text(json.dumps([{"id": "o1", "traceId": "t1", "type": "SPAN", "startTime": "yesterday"}]))

    *spans, whole = rejected_of(path)

    assert [rejected.reason for rejected in spans] == ["startTime 'yesterday' is not an RFC 3339 timestamp"]
    assert whole == Rejected(
        str(path), "read as a Langfuse observation export, and none of its spans could be converted", 0
    )


# --- Refusals --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "says"),
    [
        (
            [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "startTimeUnixNano": "1"}],
            "it looks like a list of OTLP spans without their resourceSpans/scopeSpans envelope",
        ),
        (
            {"spans": [[{"spanId": "s", "durationNano": 5, "level": 0}]], "startTimestampMillis": 0},
            "it looks like SigNoz's flamegraph answer",
        ),
        (
            {"data": [{"id": "t1", "timestamp": "2024-05-01T12:00:00Z", "observations": ["o1", "o2"]}], "meta": {}},
            "it looks like a Langfuse trace list (GET /api/public/traces)",
        ),
        (
            [{"id": "o1", "traceId": "t1", "type": "GENERATION", "name": "chat"}],
            "it looks like Langfuse observations, but the first has no 'startTime'",
        ),
        ({"hello": "world"}, "JSON in no known trace format (an object with keys ['hello'])"),
    ],
    ids=["bare-otlp-spans", "signoz-flamegraph", "langfuse-trace-list", "langfuse-no-start", "unknown"],
)
def test_refusal_names_the_format_it_saw(tmp_path: Path, document: object, says: str) -> None:
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(document))

    with pytest.raises(FormatError) as refused:
        detect_format(path)

    assert says in str(refused.value)
    assert "Hotspan reads OTLP JSON" in str(refused.value)


@pytest.mark.parametrize(
    ("name", "break_span", "pointer"),
    [
        (
            "jaeger/tracecompass__opentracing_multiple_services.json",
            lambda d: d["data"][0]["spans"][3],
            "/data/0/spans/3",
        ),
        ("zipkin/zipkin__yelp.json", lambda d: d[11], "/11"),
    ],
    ids=["jaeger", "zipkin"],
)
def test_a_span_the_store_refuses_is_named_by_its_place_in_the_file(
    store: ClickHouse, tmp_path: Path, name: str, break_span: Callable[[Any], dict], pointer: str
) -> None:
    """A converted file's span that converts but breaks a store rule (a start past 2262, DateTime64(9)'s end) is
    reported at its place in the file, not at its path in a regrouped OTLP request the file never held."""
    document = json.loads((TRACES / name).read_text())
    key = "startTime" if name.startswith("jaeger") else "timestamp"
    break_span(document)[key] = 9_300_000_000_000_000
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(document))

    summary = import_paths([path], StoreSink(ClickHouseTraceWriter(store)), progress=False)

    assert summary.rejected == 1
    (problem,) = summary.problems
    assert problem.startswith(f"{path}#{pointer}: endTimeUnixNano "), problem
    assert problem.endswith("is beyond the year 2262 (the store's DateTime64(9) range)"), problem


def test_langfuse_generations_are_llm_calls_with_their_first_token(store: ClickHouse) -> None:
    import_paths([LANGFUSE], StoreSink(ClickHouseTraceWriter(store)), progress=False)
    stored = ClickHouseTraceReader(store).trace("5b1d0a7e3c9f4e2a8b6c4d2e1f0a9b8c", tenant=ALL_TENANTS)

    calls = model_calls(analyze(stored))

    assert calls.select("span_id", "model", "input_tokens", "output_tokens", "ttft_ns").rows() == [
        ("b1b2c3d4e5f60718", "gpt-4o-mini", 412, 37, 480 * MS),
        ("e1b2c3d4e5f60718", "gpt-4o-mini", 530, 21, 460 * MS),
    ]
