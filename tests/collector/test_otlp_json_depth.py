"""Accepted implies storable: an OTLP/JSON attribute value nested just past what the protobuf runtime parses used to
pass the JSON reader, be answered 200 and then vanish at the insert (its batch-mates with it, nothing logged).

The JSON reader now counts protobuf message levels (:data:`collector.otlp_json.PROTOBUF_DEPTH_LIMIT`). These tests
hold it to the runtime at every place an attribute can sit and for both nesting kinds: every span the receiver
accepts re-encodes into bytes the inserter parses and converts, and the deepest accepted value is the deepest the
runtime parses (so the check is exactly as strict as the store, not stricter).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from collector.batch import to_batch
from collector.otlp_body import JSON, PayloadError, check_body

PLACES = ("resource", "span", "event", "link")
KINDS = ("array", "kvlist")


def nested_json(kind: str, depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        if kind == "array":
            value = {"arrayValue": {"values": [value]}}
        else:
            value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def nested_proto(kind: str, depth: int) -> AnyValue:
    value = AnyValue(string_value="leaf")
    for _ in range(depth):
        outer = AnyValue()
        if kind == "array":
            outer.array_value.values.add().CopyFrom(value)
        else:
            kv = outer.kvlist_value.values.add()
            kv.key = "k"
            kv.value.CopyFrom(value)
        value = outer
    return value


def body(place: str, kind: str, depth: int) -> bytes:
    """A request with one plain span and one span carrying the nested value at ``place``."""
    attribute = [{"key": "deep", "value": nested_json(kind, depth)}]
    start = 1_700_000_000_000_000_000
    deep: dict[str, Any] = {"traceId": "a" * 32, "spanId": "1" * 16, "name": "deep"}
    deep |= {"startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 1000)}
    plain = deep | {"spanId": "2" * 16, "name": "plain"}
    if place == "span":
        deep["attributes"] = attribute
    elif place == "event":
        deep["events"] = [{"timeUnixNano": str(start), "name": "e", "attributes": attribute}]
    elif place == "link":
        deep["links"] = [{"traceId": "b" * 32, "spanId": "3" * 16, "attributes": attribute}]
    resource = [{"key": "service.name", "value": {"stringValue": "deep"}}]
    if place == "resource":
        resource += attribute
    document = {"resourceSpans": [{"resource": {"attributes": resource}, "scopeSpans": [{"spans": [deep, plain]}]}]}
    return json.dumps(document).encode()


def runtime_parses(place: str, kind: str, depth: int) -> bool:
    """Whether the protobuf runtime parses a request holding this value at ``place`` (built as protobuf directly)."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    span = resource_spans.scope_spans.add().spans.add()
    holder = {
        "resource": lambda: resource_spans.resource.attributes,
        "span": lambda: span.attributes,
        "event": lambda: span.events.add().attributes,
        "link": lambda: span.links.add().attributes,
    }[place]()
    kv = holder.add()
    kv.key = "deep"
    kv.value.CopyFrom(nested_proto(kind, depth))
    try:
        ExportTraceServiceRequest.FromString(request.SerializeToString())
    except DecodeError:
        return False
    return True


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("place", PLACES)
def test_accepted_values_are_storable_and_the_edge_is_the_runtimes(place: str, kind: str) -> None:
    deepest_accepted = deepest_parsed = -1
    for depth in range(0, 60):
        try:
            checked = check_body(body(place, kind, depth), JSON)
        except PayloadError:  # a resource that cannot be read refuses the whole body (400): nothing acknowledged
            accepted = 0
        else:
            accepted = checked.result.accepted
            # What the receiver acknowledged, the inserter reads and converts.
            request = ExportTraceServiceRequest.FromString(checked.body)
            assert to_batch(request).accepted == accepted
            assert accepted in (1, 2)
        if accepted == 2:
            deepest_accepted = depth
        if runtime_parses(place, kind, depth):
            deepest_parsed = depth
    assert deepest_accepted == deepest_parsed, (deepest_accepted, deepest_parsed)
    assert deepest_accepted >= 30


def test_a_too_deep_value_is_refused_per_span_with_its_reason() -> None:
    checked = check_body(body("event", "kvlist", 40), JSON)
    assert (checked.result.accepted, checked.result.rejected) == (1, 1)
    assert "nests deeper than protobuf's 100 message levels" in checked.result.error_message
