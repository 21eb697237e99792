"""Times sent in the wrong unit. OTLP times are nanoseconds since the Unix epoch; an exporter that writes
microseconds, milliseconds or seconds (a common mistake: Zipkin and many SDKs' clocks count µs) sends valid OTLP
whose spans start in January 1970. They are stored as sent (re-scaling would guess), but the answer says so, in
``partial_success.error_message`` with ``rejected_spans`` 0 as the OTLP specification allows for warnings, with the
first such span, its date and the unit that reads it as a date from 2000 on; before this, the sender got a plain
200 and a search of the last hour found nothing. The traces are a real capture (otlp2parquet's protobuf file) with
every time divided as such an exporter would.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from collector.batch import EARLIEST_PLAUSIBLE_NS, check_request
from collector.native_writer import native_check
from hotspan.server import RunningServer
from testkit import TRACES

CAPTURE = TRACES / "otlp" / "otlp2parquet__traces.pb"
UNITS = {"microseconds": 10**3, "milliseconds": 10**6, "seconds": 10**9}


def capture() -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(CAPTURE.read_bytes())


def spans_of(request: ExportTraceServiceRequest) -> Iterator:
    return (span for resource in request.resource_spans for scope in resource.scope_spans for span in scope.spans)


def in_unit(scale: int) -> ExportTraceServiceRequest:
    """The capture with every time divided by ``scale`` (ns → µs for 1,000), at least 1 ns."""
    request = capture()
    for span in spans_of(request):
        span.start_time_unix_nano = max(1, span.start_time_unix_nano // scale)
        span.end_time_unix_nano = max(span.start_time_unix_nano, span.end_time_unix_nano // scale)
        for event in span.events:
            event.time_unix_nano //= scale
    return request


def test_the_capture_is_in_nanoseconds_and_draws_no_warning() -> None:
    request = capture()
    assert all(span.start_time_unix_nano >= EARLIEST_PLAUSIBLE_NS for span in spans_of(request))
    assert native_check(request.SerializeToString()) == len(list(spans_of(request)))
    assert check_request(request).warnings == []


@pytest.mark.parametrize("unit", UNITS)
def test_each_wrong_unit_is_named_and_nothing_is_rejected(unit: str) -> None:
    request = in_unit(UNITS[unit])
    verdict = check_request(request)
    assert len(verdict.kept) == len(list(spans_of(request))) and not verdict.rejections
    [warning] = verdict.warnings
    assert warning.startswith(f"{len(verdict.kept)} spans start before 2000-01-01: resourceSpans[0]")
    assert f"which read as {unit} is 2025-10-17" in warning
    assert isinstance(native_check(request.SerializeToString()), str)


def test_the_bound_is_2000_and_an_unreadable_time_names_no_unit() -> None:
    request = capture()
    first = next(spans_of(request))
    first.start_time_unix_nano = EARLIEST_PLAUSIBLE_NS
    assert check_request(request).warnings == []
    first.start_time_unix_nano = EARLIEST_PLAUSIBLE_NS - 1
    [warning] = check_request(request).warnings
    assert warning.startswith("1 span starts before 2000-01-01") and "(1999-12-31)" in warning
    assert "read as" not in warning


def test_a_served_receiver_stores_every_span_as_sent_and_says_why(hotspan_server: RunningServer) -> None:
    base = hotspan_server.base_url
    sent = in_unit(UNITS["microseconds"])
    answer = httpx.post(
        f"{base}/v1/traces",
        content=sent.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert answer.status_code == 200
    partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
    assert partial.rejected_spans == 0 and "which read as microseconds is 2025-10-17" in partial.error_message

    with grpc.insecure_channel(f"127.0.0.1:{hotspan_server.grpc_port}") as channel:
        response = trace_service_pb2_grpc.TraceServiceStub(channel).Export(sent, timeout=10)
    assert response.partial_success.error_message == partial.error_message

    assert hotspan_server.pipeline is not None and hotspan_server.pipeline.flush(30)
    trace_ids = {span.trace_id.hex() for span in spans_of(sent)}
    stored = [s for trace_id in trace_ids for s in httpx.get(f"{base}/api/v1/traces/{trace_id}").json()["spans"]]
    # Sent twice (HTTP, then gRPC), stored once, every start as sent.
    starts = sorted(span.start_time_unix_nano for span in spans_of(sent))
    assert sorted(s["start_time_unix_nano"] for s in stored) == starts
