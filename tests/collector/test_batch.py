"""The Python reference conversion (collector.batch.to_batch) on hand-made edge cases: which spans it
rejects and why, which duplicate it keeps, what it cuts, what it warns about. test_native_rows.py holds
the compiled scanner to this reference; these tests pin the reference itself."""

from __future__ import annotations

import otlp_random as otlp
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1 import trace_pb2

from collector.batch import DEFAULT_LIMITS, check_request, stored_names, to_batch
from collector.limits import SpanLimits
from collector.rejections import Rejection

SMALL = SpanLimits(max_attributes=3, max_value_chars=5, max_events=2, max_links=1)
DUPLICATES = (
    "2 span(s) sent again later in this request (same traceId, spanId, kind, name and start) are stored once, as their"
    " last copy: resourceSpans[0].scopeSpans[0].spans[13] as resourceSpans[0].scopeSpans[0].spans[15]"
)


def test_invalid_spans_are_rejected_alone_and_the_last_duplicate_is_kept_with_a_note() -> None:
    request = otlp.request(
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
    )
    batch = to_batch(request, [], SMALL)
    assert [(r.position, r.reason) for r in batch.rejections] == [
        ((0, 0, 0), "traceId must be 16 bytes (32 hex characters), got 0 bytes"),
        ((0, 0, 1), "traceId must not be all zeros"),
        ((0, 0, 3), "spanId must not be all zeros"),
        ((0, 0, 4), "parentSpanId must be 8 bytes (16 hex characters), got 1 bytes"),
        ((0, 0, 5), "startTimeUnixNano is missing or 0"),
        ((0, 0, 6), "endTimeUnixNano 5 is before startTimeUnixNano 1700000000000000000"),
        ((0, 0, 7), "endTimeUnixNano 18446744073709551615 is beyond the year 2262 (the store's DateTime64(9) range)"),
        ((0, 0, 8), "kind 7 is not a SpanKind value (0-5)"),
        ((0, 0, 9), "kind -1 is not a SpanKind value (0-5)"),
        ((0, 0, 10), "status.code 3 is not a StatusCode value (0-2)"),
        ((0, 0, 11), "events[1].timeUnixNano 9223372036854775808 is beyond the year 2262"),
        ((0, 0, 12), "links[0].spanId must be 8 bytes (16 hex characters), got 7 bytes"),
    ]
    assert (batch.accepted, batch.warnings, batch.truncated) == (3, [DUPLICATES], 0)
    rows = batch.table.to_pylist()
    assert [(r["TraceId"][:16], r["SpanId"], r["SpanAttributes"]) for r in rows] == [
        ("0000000000000000", "0000000000000003", []),
        ("5b8efff798038103", "000000000000000e", [("write", "third")]),
        ("5b8efff798038103", "000000000000000f", []),
    ]
    # A resource key given twice: the last value counts, for service.name too.
    assert {(r["ServiceName"], tuple(r["ResourceAttributes"])) for r in rows} == {
        ("b", (("service.name", "b"), ("x", "1")))
    }


def test_limits_cut_and_mark_and_an_unnamed_resource_is_warned_about() -> None:
    request = otlp.request(
        otlp.span(
            1,
            attributes=[otlp.kv(f"a{i}", AnyValue(string_value="123456789")) for i in range(6)],
            events=[
                trace_pb2.Span.Event(time_unix_nano=i + 1, attributes=[otlp.kv("k", AnyValue(int_value=1))])
                for i in range(4)
            ],
            links=[trace_pb2.Span.Link(trace_id=bytes(range(1, 17)), span_id=b"\x01" * 8)] * 3,
        ),
        resource=[
            otlp.kv("host", AnyValue(string_value="h")),
            *(otlp.kv(f"r{i}", AnyValue(int_value=i)) for i in range(5)),
        ],
    )
    batch = to_batch(request, [], SMALL)
    assert (batch.accepted, batch.rejections, batch.truncated) == (1, [], 1)
    marker = "attributes=3,events=2,links=2,resource_attributes=3,values=3"
    assert batch.warnings == [
        "resourceSpans[0].resource has no 'service.name'; stored as 'unknown_service'",
        f"1 span was over the span limits, first resourceSpans[0].scopeSpans[0].spans[0] (cut: {marker}); stored "
        "cut, marked 'hotspan.truncated' (HOTSPAN_MAX_ATTRIBUTES, HOTSPAN_MAX_EVENTS, HOTSPAN_MAX_LINKS, "
        "HOTSPAN_MAX_ATTRIBUTE_VALUE_CHARS)",
    ]
    (row,) = batch.table.to_pylist()
    assert row["ServiceName"] == "unknown_service"
    assert row["ResourceAttributes"] == [("host", "h"), ("r0", "0"), ("r1", "1")]
    assert row["SpanAttributes"] == [
        ("a0", "12345"),
        ("a1", "12345"),
        ("a2", "12345"),
        ("hotspan.truncated", marker),
    ]
    assert (len(row["Events.Name"]), len(row["Links.SpanId"])) == (2, 1)


def test_decoder_placeholders_keep_their_reason_and_are_skipped() -> None:
    request = otlp.request(otlp.span(1), trace_pb2.Span(), otlp.span(3))
    batch = to_batch(request, [Rejection.at((0, 0, 1), "spanId 'zz' is neither hex nor base64")], SMALL)
    assert [str(r) for r in batch.rejections] == [
        "resourceSpans[0].scopeSpans[0].spans[1]: spanId 'zz' is neither hex nor base64"
    ]
    assert batch.table.column("SpanId").to_pylist() == ["0000000000000001", "0000000000000003"]


@settings(max_examples=50, deadline=None)
@given(
    request=st.one_of(otlp.requests, otlp.valid_requests),
    limits=st.sampled_from([DEFAULT_LIMITS, SpanLimits(max_value_chars=1)]),
)
def test_stored_names_are_the_converted_trace_ids_and_services(
    request: ExportTraceServiceRequest, limits: SpanLimits
) -> None:
    """``hotspan import`` counts traces and services from the verdict alone (``stored_names``): the same as the
    converted columns, for 64-bit trace IDs, repeated and missing ``service.name`` and names the limits cut."""
    table = to_batch(request, [], limits).table
    converted = (set(pc.unique(table["TraceId"]).to_pylist()), set(pc.unique(table["ServiceName"]).to_pylist()))
    assert stored_names(request, check_request(request, [], limits).kept, limits) == converted
