"""The in-database conversion (collector.sqlconvert via SqlBatchWriter) against the Python reference
(collector.batch.to_batch): same answers, same rows, on hand-made edge cases and on random requests."""

from __future__ import annotations

import math
import os
import re
import struct
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from collector.attributes import go_float
from collector.batch import to_batch
from collector.batchwriter import SqlBatchWriter
from collector.ingest import export_result
from collector.limits import SpanLimits
from collector.rejections import Rejection
from collector.sqlconvert import go_float_sql, schema_file
from collector.wire import write_batch
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations
from storage.schema import with_tenant

SMALL = SpanLimits(max_attributes=3, max_value_chars=5, max_events=2, max_links=1)
ROWS_SQL = (
    "SELECT * EXCEPT (ResourceAttributeItems, SpanAttributeItems) FROM otel_traces"
    " ORDER BY SpanId, TraceId, ServiceName, ParentSpanId, SpanName"
)


@pytest.fixture
def second_store(chdb_dsn: str) -> Iterator[ClickHouse]:
    ch = ClickHouse(chdb_dsn, f"t_{uuid.uuid4().hex[:12]}")
    apply_migrations(ch)
    yield ch
    ch.command(f"DROP DATABASE IF EXISTS {ch.database}")
    ch.close()


def _sql_path(ch: ClickHouse, tmp: Path, bodies: Sequence[bytes], limits: SpanLimits, pre=None) -> list:
    path = tmp / f"batch-{uuid.uuid4().hex}.bin"
    with path.open("wb") as out:
        write_batch(out, [(body, "default") for body in bodies])
    writer = SqlBatchWriter(ch, limits, "hotspan_stage_test", tmp)
    prepared = writer.prepare(path, pre or [[] for _ in bodies])
    writer.store(prepared, uuid.uuid4().hex)
    return prepared.results


def _python_path(ch: ClickHouse, requests: Sequence[ExportTraceServiceRequest], limits: SpanLimits, pre=None) -> list:
    results = []
    for request, rejected in zip(requests, pre or [[] for _ in requests], strict=True):
        batch = to_batch(request, rejected, limits)
        if batch.table.num_rows:
            # A token of its own: otel_traces deduplicates inserts (migration 0004), and the same random
            # request may come up twice.
            ch.insert_arrow("otel_traces", with_tenant(batch.table, "default"), uuid.uuid4().hex)
        results.append(export_result(batch.accepted, batch.rejections, batch.warnings))
    return results


def _assert_same(sql_ch: ClickHouse, py_ch: ClickHouse, sql_results: list, py_results: list) -> None:
    assert sql_results == py_results
    sql_rows = sorted(sql_ch.query_arrow(ROWS_SQL).to_pylist(), key=repr)
    py_rows = sorted(py_ch.query_arrow(ROWS_SQL).to_pylist(), key=repr)
    assert len(sql_rows) == len(py_rows)
    for sql_row, py_row in zip(sql_rows, py_rows, strict=True):
        assert {k: v for k, v in sql_row.items() if py_row[k] != v} == {
            k: v for k, v in py_row.items() if sql_row[k] != v
        }


def _kv(key: str, value: AnyValue) -> common_pb2.KeyValue:
    return common_pb2.KeyValue(key=key, value=value)


def _span(span_id: int, **fields: object) -> trace_pb2.Span:
    base: dict[str, object] = {
        "trace_id": bytes.fromhex("5b8efff798038103d269b633813fc60c"),
        "span_id": span_id.to_bytes(8, "big"),
        "name": "op",
        "kind": 2,
        "start_time_unix_nano": 1_700_000_000_000_000_000,
        "end_time_unix_nano": 1_700_000_000_001_000_000,
    }
    base.update(fields)
    return trace_pb2.Span(**base)  # type: ignore[arg-type]


def _request(
    *spans: trace_pb2.Span, resource: Sequence[common_pb2.KeyValue] | None = None
) -> ExportTraceServiceRequest:
    attributes = resource if resource is not None else [_kv("service.name", AnyValue(string_value="svc"))]
    return ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource_pb2.Resource(attributes=attributes),
                scope_spans=[trace_pb2.ScopeSpans(scope=common_pb2.InstrumentationScope(name="lib"), spans=spans)],
            )
        ]
    )


EDGE_VALUES = [
    AnyValue(string_value="plain"),
    AnyValue(string_value='quote " backslash \\ nul \x00 tab \t del \x7f é 😀 \u2028'),
    AnyValue(bool_value=False),
    AnyValue(int_value=-(2**63)),
    AnyValue(double_value=1e-7),
    AnyValue(double_value=-0.0),
    AnyValue(double_value=math.nan),
    AnyValue(double_value=-math.inf),
    AnyValue(double_value=1e21),
    AnyValue(double_value=123456.789),
    AnyValue(bytes_value=b"\x00\xff"),
    AnyValue(),
    AnyValue(
        array_value=common_pb2.ArrayValue(
            values=[
                AnyValue(string_value='x"\n'),
                AnyValue(double_value=1.0),
                AnyValue(double_value=1e16),
                AnyValue(double_value=math.inf),
                AnyValue(int_value=3),
                AnyValue(bool_value=True),
                AnyValue(bytes_value=b"\x01"),
                AnyValue(),
            ]
        )
    ),
    AnyValue(kvlist_value=common_pb2.KeyValueList(values=[_kv("k\x01", AnyValue(double_value=0.1))])),
    AnyValue(kvlist_value=common_pb2.KeyValueList(values=[_kv("a", AnyValue()), _kv("a", AnyValue(int_value=1))])),
    AnyValue(
        array_value=common_pb2.ArrayValue(
            values=[AnyValue(array_value=common_pb2.ArrayValue(values=[AnyValue(string_value="deep")]))]
        )
    ),
]


def test_edge_cases_give_the_same_answers_and_rows(store: ClickHouse, second_store: ClickHouse, tmp_path: Path) -> None:
    attrs = [_kv(f"k{i}", value) for i, value in enumerate(EDGE_VALUES)]
    requests = [
        _request(*(_span(i + 1, attributes=[attr]) for i, attr in enumerate(attrs))),
        _request(
            _span(1, trace_id=b""),
            _span(2, trace_id=bytes(16)),
            _span(3, trace_id=bytes.fromhex("d269b633813fc60c")),
            _span(0),
            _span(5, parent_span_id=b"\x01"),
            _span(6, start_time_unix_nano=0),
            _span(7, end_time_unix_nano=5),
            _span(8, start_time_unix_nano=2**63, end_time_unix_nano=2**64 - 1),
            _span(9, kind=7),
            _span(10, kind=-1),
            _span(11, status=trace_pb2.Status(code=3)),
            _span(12, events=[trace_pb2.Span.Event(time_unix_nano=1), trace_pb2.Span.Event(time_unix_nano=2**63)]),
            _span(13, links=[trace_pb2.Span.Link(trace_id=bytes(range(1, 17)), span_id=b"\x02" * 7)]),
            _span(14, attributes=[_kv("write", AnyValue(string_value="first"))]),
            _span(14, attributes=[_kv("write", AnyValue(string_value="second"))]),
            _span(14, attributes=[_kv("write", AnyValue(string_value="third"))]),
            _span(15, parent_span_id=(15).to_bytes(8, "big")),
            resource=[
                _kv("service.name", AnyValue(string_value="a")),
                _kv("x", AnyValue(int_value=1)),
                _kv("service.name", AnyValue(string_value="b")),
            ],
        ),
        _request(
            _span(
                1,
                attributes=[_kv(f"a{i}", AnyValue(string_value="123456789")) for i in range(6)],
                events=[trace_pb2.Span.Event(time_unix_nano=i + 1, attributes=attrs[:5]) for i in range(4)],
                links=[trace_pb2.Span.Link(trace_id=bytes(range(1, 17)), span_id=b"\x01" * 8)] * 3,
            ),
            resource=[_kv("host", AnyValue(string_value="h"))]
            + [_kv(f"r{i}", AnyValue(int_value=i)) for i in range(5)],
        ),
        ExportTraceServiceRequest(),
    ]
    sql = _sql_path(store, tmp_path, [r.SerializeToString() for r in requests], SMALL)
    py = _python_path(second_store, requests, SMALL)
    _assert_same(store, second_store, sql, py)
    assert sql[1].rejected == 14
    reasons = [str(r) for r in sql[1].rejections]
    assert (
        "resourceSpans[0].scopeSpans[0].spans[13]: duplicate of resourceSpans[0].scopeSpans[0].spans[15]" in reasons[-2]
    )
    assert sql[2].error_message == "resourceSpans[0].resource has no 'service.name'; stored as 'unknown_service'"


def test_decoder_placeholders_keep_their_reason_and_are_skipped(
    store: ClickHouse, second_store: ClickHouse, tmp_path: Path
) -> None:
    request = _request(_span(1), trace_pb2.Span(), _span(3))
    pre = [[Rejection.at((0, 0, 1), "spanId 'zz' is neither hex nor base64")]]
    sql = _sql_path(store, tmp_path, [request.SerializeToString()], SMALL, pre)
    py = _python_path(second_store, [request], SMALL, pre)
    _assert_same(store, second_store, sql, py)
    assert sql[0].accepted == 2 and sql[0].rejected == 1
    assert "spans[1]: spanId 'zz' is neither hex nor base64" in sql[0].error_message


def test_invalid_utf8_is_stored_with_replacement_characters(store: ClickHouse, tmp_path: Path) -> None:
    # Python's protobuf runtime cannot even build such a request; splice the bytes by hand.
    body = _request(_span(1, name="AAAA")).SerializeToString().replace(b"AAAA", b"A\xed\xa0\x80")
    results = _sql_path(store, tmp_path, [body], SMALL)
    assert results[0].accepted == 1
    assert store.query_rows("SELECT SpanName FROM otel_traces") == [("A\ufffd",)]


@st.composite
def _values(draw: st.DrawFn, depth: int = 0) -> AnyValue:
    scalar = st.one_of(
        st.builds(lambda s: AnyValue(string_value=s), st.text(max_size=8)),
        st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
        st.builds(lambda i: AnyValue(int_value=i), st.integers(-(2**63), 2**63 - 1)),
        st.builds(lambda d: AnyValue(double_value=d), st.floats(allow_nan=True, allow_infinity=True)),
        st.builds(lambda b: AnyValue(bytes_value=b), st.binary(max_size=4)),
        st.just(AnyValue()),
    )
    if depth >= 2:
        return draw(scalar)
    kind = draw(st.integers(0, 5))
    if kind == 0:
        items = draw(st.lists(_values(depth + 1), max_size=3))
        return AnyValue(array_value=common_pb2.ArrayValue(values=items))
    if kind == 1:
        keys = draw(st.lists(st.sampled_from(["a", "b", "é"]), max_size=3))
        items = [_kv(key, draw(_values(depth + 1))) for key in keys]
        return AnyValue(kvlist_value=common_pb2.KeyValueList(values=items))
    return draw(scalar)


_attributes = st.lists(st.builds(_kv, st.sampled_from(["service.name", "k", "l", "m", "n"]), _values()), max_size=5)
_ids16 = st.sampled_from([b"", bytes(16), bytes(8), b"\x01" * 8, b"\x02" * 16, b"\x03" * 16, b"\x04" * 5])
_ids8 = st.sampled_from([b"", bytes(8), b"\x01" * 8, b"\x02" * 8, b"\x05" * 3])
_times = st.sampled_from([0, 1, 5, 1_700_000_000_000_000_000, 2**63 - 1, 2**63, 2**64 - 1])
_spans = st.builds(
    trace_pb2.Span,
    trace_id=_ids16,
    span_id=_ids8,
    parent_span_id=_ids8,
    trace_state=st.text(max_size=3),
    name=st.text(max_size=4),
    kind=st.integers(-1, 6),
    start_time_unix_nano=_times,
    end_time_unix_nano=_times,
    attributes=_attributes,
    events=st.lists(
        st.builds(trace_pb2.Span.Event, time_unix_nano=_times, name=st.text(max_size=3), attributes=_attributes),
        max_size=3,
    ),
    links=st.lists(st.builds(trace_pb2.Span.Link, trace_id=_ids16, span_id=_ids8, attributes=_attributes), max_size=2),
    status=st.builds(trace_pb2.Status, code=st.integers(-1, 3), message=st.text(max_size=3)),
)
_requests = st.builds(
    trace_service_pb2.ExportTraceServiceRequest,
    resource_spans=st.lists(
        st.builds(
            trace_pb2.ResourceSpans,
            resource=st.builds(resource_pb2.Resource, attributes=_attributes),
            scope_spans=st.lists(
                st.builds(
                    trace_pb2.ScopeSpans,
                    scope=st.builds(common_pb2.InstrumentationScope, name=st.text(max_size=3)),
                    spans=st.lists(_spans, max_size=4),
                ),
                max_size=2,
            ),
        ),
        max_size=2,
    ),
)


@pytest.fixture(scope="module")
def two_stores(chdb_dsn: str) -> Iterator[tuple[ClickHouse, ClickHouse]]:
    stores = (ClickHouse(chdb_dsn, f"t_{uuid.uuid4().hex[:12]}"), ClickHouse(chdb_dsn, f"t_{uuid.uuid4().hex[:12]}"))
    for ch in stores:
        apply_migrations(ch)
    yield stores
    for ch in stores:
        ch.command(f"DROP DATABASE IF EXISTS {ch.database}")
        ch.close()


@settings(
    max_examples=int(os.environ.get("HOTSPAN_DIFF_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(requests=st.lists(_requests, min_size=1, max_size=3))
def test_random_requests_give_the_same_answers_and_rows(
    two_stores: tuple[ClickHouse, ClickHouse], tmp_path: Path, requests: list[ExportTraceServiceRequest]
) -> None:
    sql_ch, py_ch = two_stores
    for ch in two_stores:
        ch.command("TRUNCATE TABLE otel_traces")
    sql = _sql_path(sql_ch, tmp_path, [r.SerializeToString() for r in requests], SMALL)
    py = _python_path(py_ch, requests, SMALL)
    _assert_same(sql_ch, py_ch, sql, py)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(numbers=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=50))
def test_float_formatting_matches_python(store: ClickHouse, numbers: list[float]) -> None:
    literals = ", ".join(f"reinterpretAsFloat64(unhex('{struct.pack('<d', n).hex()}'))" for n in numbers)
    (formatted,) = store.query_rows(f"SELECT arrayMap(d -> {go_float_sql('d')}, [{literals}])")[0]
    assert list(formatted) == [go_float(n) for n in numbers]


def test_schema_file_matches_the_otlp_descriptors() -> None:
    """Every field of collector/proto/otlp_trace.proto has the number and type opentelemetry-proto gives it."""
    text = schema_file().read_text()
    messages = {
        "AnyValue": common_pb2.AnyValue,
        "ArrayValue": common_pb2.ArrayValue,
        "KeyValueList": common_pb2.KeyValueList,
        "KeyValue": common_pb2.KeyValue,
        "InstrumentationScope": common_pb2.InstrumentationScope,
        "Resource": resource_pb2.Resource,
        "Status": trace_pb2.Status,
        "Event": trace_pb2.Span.Event,
        "Link": trace_pb2.Span.Link,
        "Span": trace_pb2.Span,
        "ScopeSpans": trace_pb2.ScopeSpans,
        "ResourceSpans": trace_pb2.ResourceSpans,
        "ExportTraceServiceRequest": trace_service_pb2.ExportTraceServiceRequest,
    }
    blocks = dict(re.findall(r"message (\w+) \{(.*?)\n\}", text, re.S))
    assert set(blocks) == set(messages)
    for name, message in messages.items():
        fields = message.DESCRIPTOR.fields_by_name
        for kind, field, number in re.findall(r"(\w+) (\w+) = (\d+);", blocks[name]):
            if field.startswith("hotspan_"):
                continue
            assert fields[field].number == int(number), (name, field)
            expected = fields[field].message_type.name if fields[field].message_type else None
            if expected:
                assert kind in (expected, expected.replace("Span.", "")), (name, field, kind)
