"""OTLP/JSON string and AnyValue fields of the wrong JSON type: ``"name": 42``, an attribute ``"value": "plain"``,
``"status": {"message": 404}``. Protobuf's JSON parser refuses them; Hotspan stored the field as ``""`` behind a
plain 200 (found by a fresh user's sweep), although ``{"stringValue": 7}`` was already refused. Now each such span
is rejected alone with its field path in ``partial_success`` (the rest of the request stored), and a resource's or
scope's field, which all its spans share, fails the request with a 400 naming it. One validator, as strict as
the store: what is answered 200 is stored as sent.
"""

from __future__ import annotations

import json

import httpx
import pytest

from collector.otlp_json import JsonPayloadError, request_from_json
from hotspan.server import RunningServer

TRACE = "5f0c7b6c3a3e4f0d9a1b2c3d4e5f6a7b"
START = 1_700_000_000_000_000_000


def span(span_id: str, **fields: object) -> dict:
    return {
        "traceId": TRACE,
        "spanId": span_id,
        "name": "op",
        "startTimeUnixNano": str(START),
        "endTimeUnixNano": str(START + 1000),
    } | fields


def body(*spans: dict, scope: dict | None = None) -> dict:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "typed"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope or {}, "spans": list(spans)}]}]}


WRONG = {
    "name": ({"name": 42}, "name must be a string, got int"),
    "name object": ({"name": {}}, "name must be a string, got dict"),
    "trace state": ({"traceState": 5}, "traceState must be a string"),
    "status message": ({"status": {"code": 2, "message": 404}}, "status.message must be a string"),
    "event name": ({"events": [{"timeUnixNano": str(START), "name": 7}]}, "events[0].name must be a string"),
    "link trace state": (
        {"links": [{"traceId": TRACE, "spanId": "00000000000000b1", "traceState": 1}]},
        "links[0].traceState must be a string",
    ),
    "attribute value a string": (
        {"attributes": [{"key": "k", "value": "plain"}]},
        "attributes[0].value must be an AnyValue object, got str",
    ),
    "attribute value a number": (
        {"attributes": [{"key": "k", "value": 7}]},
        "attributes[0].value must be an AnyValue object, got int",
    ),
    "array element": (
        {"attributes": [{"key": "k", "value": {"arrayValue": {"values": ["x"]}}}]},
        "must be an AnyValue object, got str",
    ),
}


@pytest.mark.parametrize("case", WRONG)
def test_a_wrong_typed_field_rejects_its_span_by_path(case: str) -> None:
    fields, reason = WRONG[case]
    request, rejections = request_from_json(body(span("00000000000000a1", **fields), span("00000000000000a2")))
    assert [r.path for r in rejections] == ["resourceSpans[0].scopeSpans[0].spans[0]"]
    assert reason in rejections[0].reason
    kept = request.resource_spans[0].scope_spans[0].spans[1]
    assert kept.span_id.hex() == "00000000000000a2" and kept.name == "op"


def test_absent_and_empty_fields_stay_valid() -> None:
    request, rejections = request_from_json(
        body(span("00000000000000a1", name=None, attributes=[{"key": "k", "value": {}}, {"key": "n"}]))
    )
    assert not rejections and request.resource_spans[0].scope_spans[0].spans[0].name == ""


@pytest.mark.parametrize(("scope", "field"), [({"name": 3}, "scope.name"), ({"version": ["1"]}, "scope.version")])
def test_a_wrong_typed_scope_field_fails_the_request(scope: dict, field: str) -> None:
    with pytest.raises(JsonPayloadError, match=f"resourceSpans\\[0\\].scopeSpans\\[0\\].{field} must be a string"):
        request_from_json(body(span("00000000000000a1"), scope=scope))


def test_the_served_receiver_answers_the_rejection_and_stores_the_rest(hotspan_server: RunningServer) -> None:
    base = hotspan_server.base_url
    payload = body(span("00000000000000a1", name=42), span("00000000000000a2", name="kept"))
    answer = httpx.post(f"{base}/v1/traces", content=json.dumps(payload), headers={"content-type": "application/json"})
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "spans[0]: name must be a string" in partial["errorMessage"]
    assert hotspan_server.pipeline is not None and hotspan_server.pipeline.flush(30)
    spans = httpx.get(f"{base}/api/v1/traces/{TRACE}").json()["spans"]
    assert [(s["span_id"], s["name"]) for s in spans] == [("00000000000000a2", "kept")]
    scoped = body(span("00000000000000a3"), scope={"name": 3})
    refused = httpx.post(f"{base}/v1/traces", content=json.dumps(scoped), headers={"content-type": "application/json"})
    assert refused.status_code == 400 and "scope.name must be a string" in refused.text


def test_null_is_the_fields_default_and_loses_nothing_beside_it(hotspan_server: RunningServer) -> None:
    """proto3's JSON mapping reads ``null`` as a field's default: a value member set to null is an empty value (what
    OpenTelemetry JS writes for a NaN double, as ``JSON.stringify(NaN)`` is ``null``), and a null list is an empty
    one. Found by a fresh user's sweep: the span with ``"doubleValue": null`` (a model call's token count) was
    rejected, and a scope's ``"spans": null`` failed the whole request with its valid neighbours."""
    base = hotspan_server.base_url
    trace = "6f0c7b6c3a3e4f0d9a1b2c3d4e5f6a7b"
    usage = [
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"doubleValue": None}},
    ]
    payload = body(span("00000000000000b1", traceId=trace, name="chat", attributes=usage))
    payload["resourceSpans"][0]["scopeSpans"].append({"scope": {"name": "b"}, "spans": None})
    payload["resourceSpans"].append(
        {
            "resource": None,
            "scopeSpans": [{"spans": [span("00000000000000b2", traceId=trace, parentSpanId="00000000000000b1")]}],
        }
    )
    payload["resourceSpans"].append({"resource": {}, "scopeSpans": None})

    answer = httpx.post(f"{base}/v1/traces", content=json.dumps(payload), headers={"content-type": "application/json"})

    assert answer.status_code == 200 and not answer.json().get("partialSuccess", {}).get("rejectedSpans"), answer.text
    assert hotspan_server.pipeline is not None and hotspan_server.pipeline.flush(30)
    spans = {s["span_id"]: s for s in httpx.get(f"{base}/api/v1/traces/{trace}").json()["spans"]}
    assert sorted(spans) == ["00000000000000b1", "00000000000000b2"]
    assert spans["00000000000000b1"]["attributes"]["gen_ai.usage.input_tokens"] == "12"
    assert spans["00000000000000b1"]["attributes"]["gen_ai.usage.output_tokens"] == ""
    nothing = httpx.post(
        f"{base}/v1/traces", content=json.dumps({"resourceSpans": None}), headers={"content-type": "application/json"}
    )
    assert nothing.status_code == 200
