"""oversized_payload: large request/response bodies without compression, from HTTP sizes or RPC message events."""

from __future__ import annotations

import polars as pl
from diagnosis_cases import is_tool_client, tool_calls_with
from diagnosis_support import SpanSpec, by_cause, diagnose, frame

from analysis.spans import ATTRIBUTES
from diagnosis import diagnose_spans

BODY = 1_800_000
"""The brief's incident: 1.8 MB responses."""


def test_uncompressed_http_responses_are_named_with_their_cost() -> None:
    finding = by_cause(diagnose(tool_calls_with({"http.response.body.size": str(BODY)})))["oversized_payload"]
    evidence = finding.evidence
    assert evidence["oversized_payload_count"] == 6 and evidence["payload_bytes_max"] == BODY
    assert evidence["direction_names"] == ["response"] and evidence["operation_names"] == [
        "agent POST /v1/tools/catalogue_lookup"
    ]
    # The tool call is ~21.8 of each request's ~53 ms: it is where the bodies' cost hides.
    assert 0.35 < evidence["carrying_share"] < 0.45 and finding.severity == "critical"
    assert len(evidence["example_trace_ids"]) == 3


def test_older_content_length_attributes_and_a_small_share_warn() -> None:
    spans = tool_calls_with({"http.request_content_length": str(BODY)}, tool_ms=0.5)
    finding = by_cause(diagnose(spans))["oversized_payload"]
    assert finding.evidence["direction_names"] == ["request"]
    assert finding.evidence["carrying_share"] < 0.1 and finding.severity == "warning"


def test_compressed_bodies_and_small_ones_are_fine() -> None:
    gzip = {"http.response.body.size": str(BODY), "http.response.header.content-encoding": "['gzip']"}
    assert "oversized_payload" not in by_cause(diagnose(tool_calls_with(gzip)))
    decoded = {"http.response_content_length": str(BODY), "http.response_content_length_uncompressed": "9000000"}
    assert "oversized_payload" not in by_cause(diagnose(tool_calls_with(decoded)))
    small = {"http.response.body.size": "20000"}
    assert "oversized_payload" not in by_cause(diagnose(tool_calls_with(small)))
    identity = {"http.response.body.size": str(BODY), "http.response.header.content-encoding": "identity"}
    assert "oversized_payload" in by_cause(diagnose(tool_calls_with(identity)))


def _with_message_events(spans: list[SpanSpec], compressed: int) -> pl.DataFrame:
    """The spans' frame, the tool CLIENT spans given gRPC message events: a small request SENT, a 1.8 MB
    response RECEIVED with ``compressed`` as its compressed size."""
    base = frame(spans)
    tool_client = [is_tool_client(s) for s in spans]
    sent = {"rpc.message.type": "SENT", "rpc.message.id": "1", "rpc.message.uncompressed_size": "300"}
    received = {
        "rpc.message.type": "RECEIVED",
        "rpc.message.id": "1",
        "rpc.message.uncompressed_size": str(BODY),
        "rpc.message.compressed_size": str(compressed),
    }
    return base.with_columns(
        pl.Series("event_names", [["rpc.message", "rpc.message"] if t else [] for t in tool_client]),
        pl.Series("event_attributes", [[sent, received] if t else [] for t in tool_client], dtype=pl.List(ATTRIBUTES)),
    )


def test_grpc_message_events_with_equal_sizes_went_uncompressed() -> None:
    spans = tool_calls_with({})
    finding = by_cause(diagnose_spans(_with_message_events(spans, compressed=BODY)))["oversized_payload"]
    assert finding.evidence["payload_bytes_p50"] == BODY and finding.evidence["direction_names"] == ["response"]
    assert finding.evidence["oversized_payload_count"] == 6
    assert "oversized_payload" not in by_cause(diagnose_spans(_with_message_events(spans, compressed=200_000)))
