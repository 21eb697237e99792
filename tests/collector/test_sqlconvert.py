"""The in-database conversion (collector.sqlconvert via SqlBatchWriter) against the Python reference
(collector.batch.to_batch): same answers, same rows, on hand-made edge cases and on random requests."""

from __future__ import annotations

import os
import re
import struct
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import otlp_random as otlp
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


def test_edge_cases_give_the_same_answers_and_rows(store: ClickHouse, second_store: ClickHouse, tmp_path: Path) -> None:
    attrs = [otlp.kv(f"k{i}", value) for i, value in enumerate(otlp.EDGE_VALUES)]
    requests = [
        otlp.request(*(otlp.span(i + 1, attributes=[attr]) for i, attr in enumerate(attrs))),
        otlp.request(
            otlp.span(1, trace_id=b""),
            otlp.span(2, trace_id=bytes(16)),
            otlp.span(3, trace_id=bytes.fromhex("d269b633813fc60c")),
            otlp.span(0),
            otlp.span(5, parent_span_id=b"\x01"),
            otlp.span(6, start_time_unix_nano=0),
            otlp.span(7, end_time_unix_nano=5),
            otlp.span(8, start_time_unix_nano=2**63, end_time_unix_nano=2**64 - 1),
            otlp.span(9, kind=7),
            otlp.span(10, kind=-1),
            otlp.span(11, status=trace_pb2.Status(code=3)),
            otlp.span(12, events=[trace_pb2.Span.Event(time_unix_nano=1), trace_pb2.Span.Event(time_unix_nano=2**63)]),
            otlp.span(13, links=[trace_pb2.Span.Link(trace_id=bytes(range(1, 17)), span_id=b"\x02" * 7)]),
            otlp.span(14, attributes=[otlp.kv("write", AnyValue(string_value="first"))]),
            otlp.span(14, attributes=[otlp.kv("write", AnyValue(string_value="second"))]),
            otlp.span(14, attributes=[otlp.kv("write", AnyValue(string_value="third"))]),
            otlp.span(15, parent_span_id=(15).to_bytes(8, "big")),
            resource=[
                otlp.kv("service.name", AnyValue(string_value="a")),
                otlp.kv("x", AnyValue(int_value=1)),
                otlp.kv("service.name", AnyValue(string_value="b")),
            ],
        ),
        otlp.request(
            otlp.span(
                1,
                attributes=[otlp.kv(f"a{i}", AnyValue(string_value="123456789")) for i in range(6)],
                events=[trace_pb2.Span.Event(time_unix_nano=i + 1, attributes=attrs[:5]) for i in range(4)],
                links=[trace_pb2.Span.Link(trace_id=bytes(range(1, 17)), span_id=b"\x01" * 8)] * 3,
            ),
            resource=[otlp.kv("host", AnyValue(string_value="h"))]
            + [otlp.kv(f"r{i}", AnyValue(int_value=i)) for i in range(5)],
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
    request = otlp.request(otlp.span(1), trace_pb2.Span(), otlp.span(3))
    pre = [[Rejection.at((0, 0, 1), "spanId 'zz' is neither hex nor base64")]]
    sql = _sql_path(store, tmp_path, [request.SerializeToString()], SMALL, pre)
    py = _python_path(second_store, [request], SMALL, pre)
    _assert_same(store, second_store, sql, py)
    assert sql[0].accepted == 2 and sql[0].rejected == 1
    assert "spans[1]: spanId 'zz' is neither hex nor base64" in sql[0].error_message


def test_invalid_utf8_is_stored_with_replacement_characters(store: ClickHouse, tmp_path: Path) -> None:
    # Python's protobuf runtime cannot even build such a request; splice the bytes by hand.
    body = otlp.request(otlp.span(1, name="AAAA")).SerializeToString().replace(b"AAAA", b"A\xed\xa0\x80")
    results = _sql_path(store, tmp_path, [body], SMALL)
    assert results[0].accepted == 1
    assert store.query_rows("SELECT SpanName FROM otel_traces") == [("A\ufffd",)]


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
@given(requests=st.lists(otlp.requests, min_size=1, max_size=3))
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
