"""The compiled scanner (collector._otlp_rows through collector.native_writer) against the Python
reference (collector.batch.to_batch): every request it converts gets the same answer and the same rows,
every other request goes whole to the reference, and no bytes crash it."""

from __future__ import annotations

import math
import os
import random
import struct
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import otlp_random as otlp
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from benchmarks.ingest import build_requests
from collector import _otlp_rows
from collector.attributes import go_float
from collector.batch import check_request
from collector.batchwriter import PreparedBatch, UnreadableRequestError, python_request
from collector.limits import SpanLimits
from collector.native_writer import COLUMNS, NativeBatchWriter, native_check, native_rows
from collector.otlp_body import PROTOBUF, check_body
from collector.rejections import Rejection
from collector.results import ExportResult, export_result
from collector.wire import encode_varint, read_batch, write_batch
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations
from storage.schema import STORED_SCHEMA
from storage.writer import OnceWriter

SMALL = SpanLimits(max_attributes=3, max_value_chars=5, max_events=2, max_links=1)
DEFAULT = SpanLimits()
EXAMPLES = int(os.environ.get("HOTSPAN_NATIVE_EXAMPLES", "200"))
"""Examples per random-request property (a long run: ``HOTSPAN_NATIVE_EXAMPLES=5000``)."""
ROWS_SQL = (
    "SELECT * EXCEPT (ResourceAttributeItems, SpanAttributeItems) FROM otel_traces"
    " ORDER BY SpanId, TraceId, ServiceName, ParentSpanId, SpanName"
)

# -- reading the scanner's Native blocks back -------------------------------------------------------


class _Reader:
    """A cursor over ClickHouse Native bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    def string(self) -> str:
        size = self.varint()
        self.pos += size
        return self.data[self.pos - size : self.pos].decode()

    def uint64s(self, count: int) -> list[int]:
        values = list(struct.unpack_from(f"<{count}Q", self.data, self.pos))
        self.pos += 8 * count
        return values

    def column(self, kind: str, rows: int) -> list:
        """``rows`` values of a column of type ``kind`` (the few types the scanner writes)."""
        if kind in ("UInt64", "DateTime64(9)"):
            return self.uint64s(rows)
        if kind == "String":
            return [self.string() for _ in range(rows)]
        if kind.startswith("Map("):
            ends = self.uint64s(rows)
            total = ends[-1] if ends else 0
            pairs = list(zip(self.column("String", total), self.column("String", total), strict=True))
            return [pairs[start:end] for start, end in zip([0, *ends], ends, strict=False)]
        assert kind.startswith("Array("), kind
        ends = self.uint64s(rows)
        items = self.column(kind[len("Array(") : -1], ends[-1] if ends else 0)
        return [items[start:end] for start, end in zip([0, *ends], ends, strict=False)]


def _read_rows(data: bytes) -> list[dict[str, object]]:
    """Rows of the scanner's Native blocks (strings decoded strictly: it writes only UTF-8)."""
    reader, rows = _Reader(data), []
    while reader.pos < len(data):
        count, nrows = reader.varint(), reader.varint()
        columns = {}
        for _ in range(count):
            name, kind = reader.string(), reader.string()
            columns[name] = reader.column(kind, nrows)
        assert list(columns) == list(COLUMNS)
        rows += [{name: values[i] for name, values in columns.items()} for i in range(nrows)]
    return rows


def _table_rows(table: pa.Table) -> list[dict[str, object]]:
    """Rows of a :data:`STORED_SCHEMA` table, times as integer nanoseconds like :func:`_read_rows`."""
    table = table.set_column(0, "Timestamp", table.column("Timestamp").cast(pa.int64()))
    events = table.schema.get_field_index("Events.Timestamp")
    table = table.set_column(events, "Events.Timestamp", table.column(events).cast(pa.list_(pa.int64())))
    return table.to_pylist()


# -- parity helpers ---------------------------------------------------------------------------------

MAY_PASS_LIMIT = "attribute value may be over the length limit"
"""The scanner check's anomaly for an array, bytes or number value whose text it does not format."""


def _checks_like_python(body: bytes, limits: SpanLimits = DEFAULT) -> bool:
    """Whether the scanner's check found ``body`` clean under ``limits``; if it did, assert the receiver's
    reference check (a protobuf parse and :func:`check_request`) gives the same answer."""
    spans = native_check(body, limits)
    if isinstance(spans, str):
        return False
    request = ExportTraceServiceRequest.FromString(body)
    assert check_request(request, None, limits).result() == export_result(spans, [], [])
    assert spans == sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    return True


def _converts_like_python(body: bytes, limits: SpanLimits, tenant: str = "default") -> bool:
    """Whether the scanner converted ``body``; if it did, assert the reference gives the same answer
    and rows (and that the scanner's check agrees)."""
    checked = _checks_like_python(body, limits)
    converted = native_rows(body, tenant, limits)
    if isinstance(converted, str):
        return False
    spans, rows = converted
    # The check formats nothing: a value that may pass the length limit is left to the reference.
    assert (checked and native_check(body, limits) == spans) or native_check(body, limits) == MAY_PASS_LIMIT
    result, table, truncated = python_request(body, tenant, [], limits)
    assert result == export_result(spans, [], [])
    assert truncated == 0
    assert _read_rows(rows) == (_table_rows(table) if table is not None else [])
    return True


def _answers(results: Sequence[ExportResult | UnreadableRequestError]) -> list[object]:
    return [r if isinstance(r, ExportResult) else (type(r), str(r)) for r in results]


def _batch_file(tmp: Path, bodies: Sequence[bytes], tenant: str = "default") -> Path:
    path = tmp / f"batch-{uuid.uuid4().hex}.bin"
    with path.open("wb") as out:
        write_batch(out, [(body, tenant) for body in bodies])
    return path


def _python_prepare(path: Path, pre: Sequence[Sequence[Rejection]], limits: SpanLimits) -> PreparedBatch:
    """The reference for a whole batch file: every request through :func:`python_request`."""
    results: list[ExportResult | UnreadableRequestError] = []
    tables = []
    truncated = 0
    for (body, tenant), rejected in zip(read_batch(path.read_bytes()), pre, strict=True):
        result, table, cut = python_request(body, tenant, rejected, limits)
        results.append(result)
        truncated += cut
        if table is not None:
            tables.append(table)
    return PreparedBatch(path, results, truncated, tables)


def _assert_writer_matches_python(
    tmp: Path, bodies: Sequence[bytes], limits: SpanLimits, pre: list[list[Rejection]] | None = None
) -> PreparedBatch:
    """The native writer's prepared batch against :func:`_python_prepare` of the same file; the native one."""
    path = _batch_file(tmp, bodies)
    pre = pre or [[] for _ in bodies]
    writer = NativeBatchWriter(None, limits)  # type: ignore[arg-type]  # prepare needs no database
    native = writer.prepare(path, pre)
    python = _python_prepare(path, pre, limits)
    assert _answers(native.results) == _answers(python.results)
    assert native.truncated == python.truncated
    got = _read_rows(native.native_rows) + [r for t in native.python_tables for r in _table_rows(t)]
    want = [r for t in python.python_tables for r in _table_rows(t)]
    assert sorted(got, key=repr) == sorted(want, key=repr)
    return native


# -- clean requests ---------------------------------------------------------------------------------


def test_benchmark_requests_convert_natively_row_for_row() -> None:
    for body in build_requests(2048, per_request=512) + build_requests(300, per_request=7, seed=3):
        assert _converts_like_python(body, DEFAULT)


def test_columns_are_the_stored_ones_but_aliases() -> None:
    assert list(COLUMNS) == STORED_SCHEMA.names


@settings(max_examples=EXAMPLES, deadline=None)
@given(request=otlp.valid_requests)
def test_valid_requests_convert_natively_row_for_row(request: ExportTraceServiceRequest) -> None:
    body = request.SerializeToString()
    if not _converts_like_python(body, DEFAULT):
        # The one thing such a request may hold that the scanner leaves to Python: a duplicate span.
        result, _, _ = python_request(body, "default", [], DEFAULT)
        assert isinstance(result, ExportResult)
        assert not result.rejected and "sent again later in this request" in result.error_message


@settings(max_examples=EXAMPLES, deadline=None)
@given(request=otlp.valid_requests)
def test_under_small_limits_what_converts_matches(request: ExportTraceServiceRequest) -> None:
    _converts_like_python(request.SerializeToString(), SMALL)


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests=st.lists(st.one_of(otlp.requests, otlp.valid_requests), min_size=1, max_size=4))
def test_random_batches_give_the_reference_answers_and_rows(
    tmp_path: Path, requests: list[ExportTraceServiceRequest]
) -> None:
    bodies = [r.SerializeToString() for r in requests]
    for limits in (SMALL, DEFAULT):
        for body in bodies:
            _converts_like_python(body, limits)
        _assert_writer_matches_python(tmp_path, bodies, limits)


def test_edge_values_convert_like_python() -> None:
    spans = [otlp.span(i + 1, attributes=[otlp.kv("k", value)]) for i, value in enumerate(otlp.EDGE_VALUES)]
    converted = [_converts_like_python(otlp.request(span).SerializeToString(), DEFAULT) for span in spans]
    shapes = [value.WhichOneof("value") for value in otlp.EDGE_VALUES]
    # Key-value lists and arrays holding arrays go to Python; everything else the scanner writes itself.
    nested = [
        kind == "kvlist_value"
        or (kind == "array_value" and any(v.WhichOneof("value") == "array_value" for v in value.array_value.values))
        for kind, value in zip(shapes, otlp.EDGE_VALUES, strict=True)
    ]
    assert converted == [not n for n in nested]


def test_doubles_inside_arrays_are_written_as_json_does() -> None:
    numbers = [0.0, -0.0, 1.0, 1e16, 1e15, 1e-5, 1e-4, 0.1, 1 / 3, 2.0**-1074, 1.7976931348623157e308, 123456789.0]
    numbers += [math.inf, -math.inf, math.nan, 5e-324, 2.0**60, 2.0**-44]
    array = AnyValue(array_value=common_pb2.ArrayValue(values=[AnyValue(double_value=n) for n in numbers]))
    body = otlp.request(otlp.span(1, attributes=[otlp.kv("a", array)])).SerializeToString()
    assert _converts_like_python(body, DEFAULT)


# -- anomalies go whole to Python -------------------------------------------------------------------


def _with_resource(*attributes: common_pb2.KeyValue) -> bytes:
    return otlp.request(otlp.span(1), resource=list(attributes)).SerializeToString()


def _spliced(body: bytes, old: bytes, new: bytes) -> bytes:
    assert body.count(old) == 1
    return body.replace(old, new)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | wire) + payload


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _field(number, 2, encode_varint(len(payload)) + payload)


def _span_with_raw(extra: bytes) -> bytes:
    """A request whose one span has ``extra`` appended to its serialized fields."""
    span = otlp.span(1).SerializeToString() + extra
    scope = _length_delimited(2, span)
    resource = _length_delimited(1, otlp.kv("service.name", AnyValue(string_value="svc")).SerializeToString())
    resource_spans = _length_delimited(1, resource) + _length_delimited(2, scope)
    return _length_delimited(1, resource_spans)


def _value(value: AnyValue) -> bytes:
    return otlp.request(otlp.span(1, attributes=[otlp.kv("k", value)])).SerializeToString()


LONG = "é" * 6
ANOMALIES: dict[str, bytes] = {
    "trace ID empty": otlp.request(otlp.span(1, trace_id=b"")).SerializeToString(),
    "trace ID zero": otlp.request(otlp.span(1, trace_id=bytes(16))).SerializeToString(),
    "trace ID short": otlp.request(otlp.span(1, trace_id=b"\x01" * 5)).SerializeToString(),
    "span ID zero": otlp.request(otlp.span(0)).SerializeToString(),
    "span ID 16 bytes": otlp.request(
        trace_pb2.Span(trace_id=b"\x01" * 16, span_id=b"\x01" * 16, start_time_unix_nano=1, end_time_unix_nano=2)
    ).SerializeToString(),
    "parent ID short": otlp.request(otlp.span(1, parent_span_id=b"\x01")).SerializeToString(),
    "parent ID zero": otlp.request(otlp.span(1, parent_span_id=bytes(8))).SerializeToString(),
    "no start": otlp.request(otlp.span(1, start_time_unix_nano=0)).SerializeToString(),
    "end before start": otlp.request(otlp.span(1, end_time_unix_nano=5)).SerializeToString(),
    "start past 2262": otlp.request(
        otlp.span(1, start_time_unix_nano=2**63, end_time_unix_nano=2**64 - 1)
    ).SerializeToString(),
    "kind 6": otlp.request(otlp.span(1, kind=6)).SerializeToString(),
    "kind -1": otlp.request(otlp.span(1, kind=-1)).SerializeToString(),
    "status 3": otlp.request(otlp.span(1, status=trace_pb2.Status(code=3))).SerializeToString(),
    "status -1": otlp.request(otlp.span(1, status=trace_pb2.Status(code=-1))).SerializeToString(),
    "event past 2262": otlp.request(
        otlp.span(1, events=[trace_pb2.Span.Event(time_unix_nano=2**63)])
    ).SerializeToString(),
    "link span ID short": otlp.request(
        otlp.span(1, links=[trace_pb2.Span.Link(trace_id=b"\x01" * 16, span_id=b"\x02" * 7)])
    ).SerializeToString(),
    "link trace ID zero": otlp.request(
        otlp.span(1, links=[trace_pb2.Span.Link(trace_id=bytes(16), span_id=b"\x02" * 8)])
    ).SerializeToString(),
    "duplicate span": otlp.request(otlp.span(1), otlp.span(1)).SerializeToString(),
    "duplicate with a 64-bit trace ID": otlp.request(
        otlp.span(1, trace_id=b"\x05" * 8), otlp.span(1, trace_id=bytes(8) + b"\x05" * 8)
    ).SerializeToString(),
    "resource without service.name": _with_resource(otlp.kv("host", AnyValue(string_value="h"))),
    "empty service.name": _with_resource(otlp.kv("service.name", AnyValue(string_value=""))),
    "service.name without value": _with_resource(otlp.kv("service.name", AnyValue())),
    "resource key twice": _with_resource(
        otlp.kv("service.name", AnyValue(string_value="a")), otlp.kv("service.name", AnyValue(string_value="b"))
    ),
    "unnamed resource without spans": ExportTraceServiceRequest(
        resource_spans=[trace_pb2.ResourceSpans(), *otlp.request(otlp.span(1)).resource_spans]
    ).SerializeToString(),
    "too many span attributes": otlp.request(
        otlp.span(1, attributes=[otlp.kv(f"k{i}", AnyValue(int_value=i)) for i in range(4)])
    ).SerializeToString(),
    "too many resource attributes": _with_resource(
        otlp.kv("service.name", AnyValue(string_value="s")),
        *(otlp.kv(f"r{i}", AnyValue(int_value=i)) for i in range(3)),
    ),
    "too many event attributes": otlp.request(
        otlp.span(
            1,
            events=[
                trace_pb2.Span.Event(
                    time_unix_nano=1, attributes=[otlp.kv(f"k{i}", AnyValue(int_value=i)) for i in range(4)]
                )
            ],
        )
    ).SerializeToString(),
    "too many link attributes": otlp.request(
        otlp.span(
            1,
            links=[
                trace_pb2.Span.Link(
                    trace_id=b"\x01" * 16,
                    span_id=b"\x01" * 8,
                    attributes=[otlp.kv(f"k{i}", AnyValue(int_value=i)) for i in range(4)],
                )
            ],
        )
    ).SerializeToString(),
    "too many events": otlp.request(
        otlp.span(1, events=[trace_pb2.Span.Event(time_unix_nano=i) for i in range(3)])
    ).SerializeToString(),
    "too many links": otlp.request(
        otlp.span(1, links=[trace_pb2.Span.Link(trace_id=b"\x01" * 16, span_id=b"\x01" * 8)] * 2)
    ).SerializeToString(),
    "string value too long in code points": _value(AnyValue(string_value=LONG)),
    "service.name too long": _with_resource(otlp.kv("service.name", AnyValue(string_value=LONG))),
    "int value too long": _value(AnyValue(int_value=123456)),
    "double value too long": _value(AnyValue(double_value=0.1234)),
    "bytes value too long": _value(AnyValue(bytes_value=b"1234")),
    "array value too long": _value(AnyValue(array_value=common_pb2.ArrayValue(values=[AnyValue(int_value=1)] * 3))),
    "key-value list": _value(AnyValue(kvlist_value=common_pb2.KeyValueList())),
    "nested array": _value(
        AnyValue(array_value=common_pb2.ArrayValue(values=[AnyValue(array_value=common_pb2.ArrayValue())]))
    ),
    "marker key": otlp.request(
        otlp.span(1, attributes=[otlp.kv("hotspan.truncated", AnyValue(string_value="v"))])
    ).SerializeToString(),
    "string_value_strindex": _value(AnyValue(string_value_strindex=3)),
    "key_strindex": otlp.request(
        otlp.span(1, attributes=[common_pb2.KeyValue(key="k", key_strindex=2, value=AnyValue(int_value=1))])
    ).SerializeToString(),
    "scope attributes": ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource_pb2.Resource(attributes=[otlp.kv("service.name", AnyValue(string_value="s"))]),
                scope_spans=[
                    trace_pb2.ScopeSpans(
                        scope=common_pb2.InstrumentationScope(attributes=[otlp.kv("a", AnyValue())]),
                        spans=[otlp.span(1)],
                    )
                ],
            )
        ]
    ).SerializeToString(),
    "resource entity_refs": ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource_pb2.Resource(
                    attributes=[otlp.kv("service.name", AnyValue(string_value="s"))],
                    entity_refs=[common_pb2.EntityRef(type="t")],
                ),
                scope_spans=[trace_pb2.ScopeSpans(spans=[otlp.span(1)])],
            )
        ]
    ).SerializeToString(),
    "invalid UTF-8 in a name": _spliced(
        otlp.request(otlp.span(1, name="AAAA")).SerializeToString(), b"AAAA", b"A\xed\xa0\x80"
    ),
    "invalid UTF-8 in a key": _spliced(_value(AnyValue(int_value=1)), b"\x0a\x01k", b"\x0a\x01\xff"),
    "invalid UTF-8 in schema_url": ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource_pb2.Resource(attributes=[otlp.kv("service.name", AnyValue(string_value="s"))]),
                schema_url="BBBB",
            )
        ]
    )
    .SerializeToString()
    .replace(b"BBBB", b"B\xc0\xafB"),
    "span name given twice": _span_with_raw(_length_delimited(5, b"other")),
    "kind as length-delimited": _span_with_raw(_length_delimited(6, b"\x01")),
    "group": _span_with_raw(_field(20, 3, b"") + _field(20, 4, b"")),
    "AnyValue with two values": _span_with_raw(
        _length_delimited(
            9, _length_delimited(1, b"k") + _length_delimited(2, _length_delimited(1, b"ZZ") + b"\x18\x01")
        )
    ),
    "truncated": otlp.request(otlp.span(1)).SerializeToString()[:-3],
    "overlong varint": _span_with_raw(_field(10, 0, b"\xff" * 10 + b"\x01")),
    "field number 0": _span_with_raw(b"\x00\x01"),
}


@pytest.mark.parametrize("name", ANOMALIES)
def test_anomalies_go_whole_to_python_with_the_reference_answer(tmp_path: Path, name: str) -> None:
    body = ANOMALIES[name]
    clean = otlp.request(otlp.span(9)).SerializeToString()
    assert isinstance(native_rows(body, "default", SMALL), str)
    if _checks_like_python(body):
        assert name.startswith("too many") or "too long" in name
    prepared = _assert_writer_matches_python(tmp_path, [clean, body, clean], SMALL)
    assert len(_read_rows(prepared.native_rows)) == 2  # the clean requests' one span each; nothing of the anomaly


def test_the_receiver_answers_clean_bodies_without_a_protobuf_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = build_requests(10, per_request=10)[0]
    expected = check_body(ANOMALIES["duplicate span"], PROTOBUF)
    assert expected.result.rejected == 0 and "sent again later" in expected.result.error_message
    monkeypatch.setattr("collector.otlp_body.decode_request", lambda raw, media: pytest.fail("parsed"))
    checked = check_body(clean, PROTOBUF)
    assert (checked.body, checked.spans, checked.result) == (clean, 10, export_result(10, [], []))


def test_unknown_fields_are_skipped_like_protobuf_does() -> None:
    unknown = _field(99, 0, b"\x05") + _length_delimited(100, b"\xff\xfe") + _field(101, 1, bytes(8))
    unknown += _field(102, 5, bytes(4))
    assert _converts_like_python(_span_with_raw(unknown), DEFAULT)


def test_decoder_placeholders_go_to_python(tmp_path: Path) -> None:
    body = otlp.request(otlp.span(1), trace_pb2.Span(), otlp.span(3)).SerializeToString()
    pre = [[Rejection.at((0, 0, 1), "spanId 'zz' is neither hex nor base64")]]
    prepared = _assert_writer_matches_python(tmp_path, [body], SMALL, pre)
    assert prepared.native_rows == b""


def test_known_fields_cover_the_otlp_descriptors() -> None:
    """Every field opentelemetry-proto knows is one the scanner reads or refuses: a field it skipped as
    unknown could be one Python reads (and rejects the request over)."""
    messages = {
        "ExportTraceServiceRequest": trace_service_pb2.ExportTraceServiceRequest,
        "ResourceSpans": trace_pb2.ResourceSpans,
        "Resource": resource_pb2.Resource,
        "ScopeSpans": trace_pb2.ScopeSpans,
        "InstrumentationScope": common_pb2.InstrumentationScope,
        "KeyValue": common_pb2.KeyValue,
        "AnyValue": common_pb2.AnyValue,
        "ArrayValue": common_pb2.ArrayValue,
        "Span": trace_pb2.Span,
        "Event": trace_pb2.Span.Event,
        "Link": trace_pb2.Span.Link,
        "Status": trace_pb2.Status,
    }
    assert set(_otlp_rows.KNOWN_FIELDS) == set(messages)
    for name, message in messages.items():
        assert set(_otlp_rows.KNOWN_FIELDS[name]) == {f.number for f in message.DESCRIPTOR.fields}, name


# -- hostile bytes ----------------------------------------------------------------------------------

_SEEDS = [
    build_requests(3, per_request=3)[0],
    ANOMALIES["duplicate span"],
    otlp.request(
        otlp.span(1, attributes=[otlp.kv(f"k{i}", v) for i, v in enumerate(otlp.EDGE_VALUES[:13])]),
        otlp.span(2, events=[trace_pb2.Span.Event(time_unix_nano=3, name="e")]),
        otlp.span(3, links=[trace_pb2.Span.Link(trace_id=b"\x01" * 16, span_id=b"\x01" * 8)]),
    ).SerializeToString(),
]


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(st.sampled_from(_SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(len(body) - 1, 0)))
        action = draw(st.integers(0, 3))
        if action == 0 and body:
            body[at] = draw(st.integers(0, 255))
        elif action == 1:
            body[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif action == 2:
            del body[at : at + draw(st.integers(1, 4))]
        else:
            body = body[:at]
    return bytes(body)


@settings(max_examples=int(os.environ.get("HOTSPAN_FUZZ_EXAMPLES", "2000")), deadline=None)
@given(body=st.one_of(st.binary(max_size=200), _mutated()))
def test_hostile_bytes_never_crash_and_what_converts_matches(body: bytes) -> None:
    # Whatever the scanner accepts, Python must read the same way (or the scanner was too lax).
    for limits in (SMALL, DEFAULT):
        _converts_like_python(body, limits)


# -- doubles ----------------------------------------------------------------------------------------


@settings(max_examples=2000, deadline=None)
@given(
    number=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(0, 2**64 - 1).map(lambda bits: struct.unpack("<d", struct.pack("<Q", bits))[0]),
    )
)
def test_go_float_matches_python(number: float) -> None:
    assert _otlp_rows.go_float(number) == go_float(number)


def test_go_float_on_many_random_doubles() -> None:
    rnd = random.Random(11)
    numbers = [struct.unpack("<d", rnd.randbytes(8))[0] for _ in range(50_000)]
    numbers += [rnd.random() * 10.0 ** rnd.randint(-30, 30) for _ in range(50_000)]
    numbers += [round(rnd.random() * 10.0 ** rnd.randint(-6, 16), rnd.randint(0, 10)) for _ in range(50_000)]
    numbers += [rnd.randint(1, 10**15) / 10.0 ** rnd.randint(0, 9) for _ in range(50_000)]
    numbers += [2.0**e for e in range(-1074, 1024)] + [10.0**e for e in range(-323, 309)]
    numbers += [n * 10.0**e for n in (1, 9.999999999999999, 0.30000000000000004, 123.456) for e in range(-30, 30)]
    numbers += [float(n) for n in (1, 12, 123456789, 2**53, 2**53 + 2, 10**21, 10**21 - 2**17)]
    # The exact 128-bit path's edges: measured values of 16-17 digits, the doubles beside short decimals (one end
    # of their interval a short decimal), beside powers of two (where the step below halves) and of ten.
    numbers += [rnd.random() * 10.0 ** rnd.randint(-8, 16) for _ in range(50_000)]
    short = [rnd.randint(1, 10 ** rnd.randint(1, 17)) / 10.0 ** rnd.randint(0, 22) for _ in range(20_000)]
    numbers += [math.nextafter(n, toward) for n in short for toward in (0.0, math.inf)]
    numbers += [math.nextafter(2.0**e, toward) for e in range(-1000, 1023) for toward in (0.0, math.inf)]
    numbers += [math.nextafter(10.0**e, toward) for e in range(-30, 30) for toward in (0.0, math.inf)]
    numbers += [float(n) + f for n in (1, 12, 2**51, 2**52 - 1) for f in (0.125, 0.25, 0.5, 0.75)]
    numbers += [-n for n in numbers]
    mismatches = [n for n in numbers if _otlp_rows.go_float(n) != go_float(n)]
    assert mismatches == []


# -- through a real ClickHouse ----------------------------------------------------------------------


@pytest.fixture
def second_store(chdb_dsn: str) -> Iterator[ClickHouse]:
    ch = ClickHouse(chdb_dsn, f"t_{uuid.uuid4().hex[:12]}")
    apply_migrations(ch)
    yield ch
    ch.command(f"DROP DATABASE IF EXISTS {ch.database}")
    ch.close()


def test_stored_rows_equal_the_python_references(store: ClickHouse, second_store: ClickHouse, tmp_path: Path) -> None:
    clean = otlp.request(
        otlp.span(
            1,
            trace_id=b"\x07" * 8,
            attributes=[
                otlp.kv("dup", AnyValue(string_value="first")),
                otlp.kv("dup", AnyValue(int_value=2)),
                otlp.kv("", AnyValue(string_value="nul \x00 é 😀")),
                otlp.kv("d", AnyValue(double_value=1e21)),
                *(otlp.kv(f"e{i}", value) for i, value in enumerate(otlp.EDGE_VALUES[:13])),
            ],
            events=[trace_pb2.Span.Event(time_unix_nano=5, name="ev", attributes=[otlp.kv("a", AnyValue())])],
            links=[trace_pb2.Span.Link(trace_id=b"\x03" * 8, span_id=b"\x04" * 8, trace_state="t=1")],
            status=trace_pb2.Status(code=2, message="boom"),
        ),
        otlp.span(2, parent_span_id=(1).to_bytes(8, "big"), kind=5),
    )
    bodies = [*build_requests(600, per_request=300), clean.SerializeToString(), ANOMALIES["duplicate span"]]
    path = _batch_file(tmp_path, bodies, tenant="acme")
    pre: list[list[Rejection]] = [[] for _ in bodies]
    native = NativeBatchWriter(store, DEFAULT)
    prepared = native.prepare(path, pre)
    # The clean requests' spans come from the scanner, the anomaly's (its spans but the duplicate) from Python.
    accepted = [result.accepted for result in prepared.results if isinstance(result, ExportResult)]
    assert len(_read_rows(prepared.native_rows)) == sum(accepted[:3])
    assert sum(table.num_rows for table in prepared.python_tables) == accepted[3]
    native.store(prepared)
    assert native.store(prepared).stored == 0  # a replay after a crash stores nothing twice
    OnceWriter(second_store).store(tables=_python_prepare(path, pre, DEFAULT).python_tables)
    got = store.query_arrow(ROWS_SQL).to_pylist()
    want = second_store.query_arrow(ROWS_SQL).to_pylist()
    assert len(got) == 603  # the duplicate is stored once
    assert got == want
    assert {row["Tenant"] for row in got} == {"acme"}
