"""Fuzzing the OTLP protobuf and JSON decoders (collector.otlp_body.check_body) with hypothesis.

Property: any body is either refused whole with a PayloadError (HTTP 400) or decoded into a request
whose spans are all accounted for (stored or rejected with a reason); nothing else is ever raised.
CI runs a bounded number of examples; ``HOTSPAN_FUZZ_EXAMPLES`` sets more for a long run
(benchmarks/README.md records one).
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.otlp_body import JSON, PROTOBUF, PayloadError, check_body

EXAMPLES = int(os.environ.get("HOTSPAN_FUZZ_EXAMPLES", "500"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

SEED_JSON = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
            "scopeSpans": [
                {
                    "scope": {"name": "lib", "version": "1"},
                    "spans": [
                        {
                            "traceId": "5b8efff798038103d269b633813fc60c",
                            "spanId": "eee19b7ec3c1b174",
                            "parentSpanId": "eee19b7ec3c1b173",
                            "name": "op",
                            "kind": 2,
                            "startTimeUnixNano": "1544712660000000000",
                            "endTimeUnixNano": "1544712661000000000",
                            "attributes": [
                                {"key": "a", "value": {"arrayValue": {"values": [{"intValue": "1"}]}}},
                                {"key": "k", "value": {"kvlistValue": {"values": [{"key": "x", "value": {}}]}}},
                            ],
                            "events": [{"timeUnixNano": "1544712660500000000", "name": "e"}],
                            "links": [{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b170"}],
                            "status": {"code": 2, "message": "boom"},
                        }
                    ],
                }
            ],
        }
    ]
}
SEED_PROTOBUF = check_body(json.dumps(SEED_JSON).encode(), JSON).body


def _accounted(raw: bytes, media: str) -> None:
    try:
        checked = check_body(raw, media)
    except PayloadError as exc:
        assert exc.status == 400
        return
    request = ExportTraceServiceRequest.FromString(checked.body)
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    assert checked.spans == spans
    assert checked.result.accepted + checked.result.rejected == spans
    assert checked.result.rejected == len(checked.result.rejections)


def _mutate(seed: bytes, data: st.DataObject) -> bytes:
    raw = bytearray(seed)
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, max(0, len(raw) - 1)))
        action = data.draw(st.sampled_from(["flip", "drop", "insert", "truncate"]))
        if action == "flip" and raw:
            raw[position] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "drop" and raw:
            del raw[position]
        elif action == "insert":
            raw[position:position] = data.draw(st.binary(min_size=1, max_size=4))
        else:
            del raw[position:]
    return bytes(raw)


@FUZZ
@given(raw=st.binary(max_size=512))
def test_random_bytes_as_protobuf(raw: bytes) -> None:
    _accounted(raw, PROTOBUF)


@FUZZ
@given(data=st.data())
def test_mutated_protobuf_requests(data: st.DataObject) -> None:
    _accounted(_mutate(SEED_PROTOBUF, data), PROTOBUF)


@FUZZ
@given(data=st.data())
def test_mutated_json_requests(data: st.DataObject) -> None:
    _accounted(_mutate(json.dumps(SEED_JSON).encode(), data), JSON)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=10)
    | st.sampled_from(["5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "\ud800", "NaN", "1e999"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25,
)
_span_keys = st.sampled_from(
    (
        *("traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano"),
        *("attributes", "events", "links", "status", "flags", "traceState"),
    )
)


@FUZZ
@given(span=st.dictionaries(_span_keys, _json_values, max_size=8), resource=_json_values)
def test_structured_json_with_wrong_types_everywhere(span: dict, resource: object) -> None:
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}
    _accounted(json.dumps(body).encode(), JSON)
