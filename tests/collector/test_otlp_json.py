"""OTLP/JSON decoding rules (OTLP spec, "JSON Protobuf Encoding") on hand-made and real bodies."""

from __future__ import annotations

import base64
import json

import pytest

from collector.batch import to_batch
from collector.otlp_json import JsonPayloadError, request_from_json
from testkit import TRACES

TRACE_HEX = "5b8efff798038103d269b633813fc60c"
SPAN_HEX = "eee19b7ec3c1b174"


def _body(*spans: dict) -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "scopeSpans": [{"scope": {"name": "lib", "version": "1"}, "spans": list(spans)}],
            }
        ]
    }


def _span(**overrides: object) -> dict:
    span = {
        "traceId": TRACE_HEX,
        "spanId": SPAN_HEX,
        "name": "op",
        "kind": 2,
        "startTimeUnixNano": "1544712660000000000",
        "endTimeUnixNano": "1544712661000000000",
    }
    span.update(overrides)
    return span


def _rows(body: dict) -> tuple[list[dict], list[str]]:
    batch = to_batch(*request_from_json(body))
    return batch.table.to_pylist(), [str(r) for r in batch.rejections]


def test_hex_ids_any_case_and_base64_ids_decode_to_lowercase_hex() -> None:
    # Two requests: in one request the second span would be a duplicate of the first (last one wins).
    for span in (
        _span(traceId=TRACE_HEX.upper(), spanId=SPAN_HEX.upper()),
        _span(
            traceId=base64.b64encode(bytes.fromhex(TRACE_HEX)).decode(),
            spanId=base64.b64encode(bytes.fromhex(SPAN_HEX)).decode(),
        ),
    ):
        rows, rejected = _rows(_body(span))
        assert rejected == []
        assert [(r["TraceId"], r["SpanId"]) for r in rows] == [(TRACE_HEX, SPAN_HEX)]


def test_64_bit_trace_id_is_left_padded() -> None:
    rows, _ = _rows(_body(_span(traceId="d269b633813fc60c")))
    assert rows[0]["TraceId"] == "0000000000000000d269b633813fc60c"


def test_int64_as_string_or_number_enum_as_int_or_name_and_unknown_fields_ignored() -> None:
    rows, rejected = _rows(
        _body(
            _span(
                startTimeUnixNano=1544712660000000000,
                endTimeUnixNano="1544712660000000500",
                kind="SPAN_KIND_CLIENT",
            ),
            _span(spanId="eee19b7ec3c1b175", somethingNew={"x": 1}, status={"code": "STATUS_CODE_ERROR"}),
        )
    )
    assert rejected == []
    assert rows[0]["Duration"] == 500
    assert rows[0]["SpanKind"] == "Client"
    assert rows[1]["StatusCode"] == "Error"


def test_attribute_values_of_every_type_are_stringified_like_the_clickhouse_exporter() -> None:
    attributes = [
        {"key": "s", "value": {"stringValue": "text"}},
        {"key": "b", "value": {"boolValue": True}},
        {"key": "i", "value": {"intValue": "-9007199254740993"}},
        {"key": "d", "value": {"doubleValue": 2.5}},
        {"key": "by", "value": {"bytesValue": base64.b64encode(b"\x00\x01").decode()}},
        {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "x"}, {"intValue": 3}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}}},
        {"key": "empty", "value": {}},
    ]
    rows, _ = _rows(_body(_span(attributes=attributes)))
    assert dict(rows[0]["SpanAttributes"]) == {
        "s": "text",
        "b": "true",
        "i": "-9007199254740993",
        "d": "2.5",
        "by": "AAE=",
        "a": '["x",3]',
        "kv": '{"k":false}',
        "empty": "",
    }


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"traceId": "zzz"}, "traceId 'zzz' is neither hex nor base64"),
        ({"spanId": "00000000000000"}, "spanId must be 8 bytes"),
        ({"spanId": "0000000000000000"}, "spanId must not be all zeros"),
        ({"endTimeUnixNano": "1544712659000000000"}, "is before startTimeUnixNano"),
        ({"kind": 9}, "kind 9 is not one of"),
        ({"startTimeUnixNano": "soon"}, "startTimeUnixNano must be an integer"),
        (
            {"attributes": [{"key": "x", "value": {"intValue": "1.5x"}}]},
            "attributes[0].value must be an integer",
        ),
    ],
)
def test_one_bad_span_is_rejected_alone_and_named(override: dict, reason: str) -> None:
    rows, rejected = _rows(_body(_span(spanId="1111111111111111"), _span(**override), _span(spanId="2222222222222222")))
    assert [r["SpanId"] for r in rows] == ["1111111111111111", "2222222222222222"]
    assert len(rejected) == 1
    assert rejected[0].startswith("resourceSpans[0].scopeSpans[0].spans[1]: ")
    assert reason in rejected[0]


@pytest.mark.parametrize("body", [[], "x", {"resourceSpans": {}}, {"resourceSpans": [1]}])
def test_a_body_that_is_not_a_request_is_refused_whole(body: object) -> None:
    with pytest.raises(JsonPayloadError):
        request_from_json(body)


def test_spec_example_file_decodes_with_upper_case_hex_ids() -> None:
    rows, rejected = _rows(json.loads((TRACES / "otlp" / "otelproto__trace.json").read_text()))
    assert rejected == []
    assert rows[0]["TraceId"] == TRACE_HEX
    assert rows[0]["ParentSpanId"] == "eee19b7ec3c1b173"
    assert rows[0]["ScopeName"] == "my.library"
    assert rows[0]["Duration"] == 1_000_000_000


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "otlp2parquet__invalid_trace_invalid_base64.json",
            "traceId '!!!INVALID_BASE64!!!' is neither hex nor base64",
        ),
        ("otlp2parquet__invalid_trace_invalid_kind.json", "kind 'SPAN_KIND_INVALID_TYPE' is not one of"),
        ("otlp2parquet__invalid_trace_mixed_encoding.json", "traceId 'zzz' is neither hex nor base64"),
    ],
)
def test_shared_invalid_files_are_rejected_with_a_clear_reason(name: str, reason: str) -> None:
    rows, rejected = _rows(json.loads((TRACES / "invalid" / name).read_text()))
    assert rows == []
    assert len(rejected) == 1 and reason in rejected[0]


def test_resource_without_service_name_is_stored_as_unknown_service_with_a_warning() -> None:
    body = json.loads((TRACES / "invalid" / "jaegerui__otlp2jaeger-in-error.json").read_text())
    batch = to_batch(*request_from_json(body))
    assert batch.table.column("ServiceName").to_pylist() == ["unknown_service"]
    assert batch.warnings == ["resourceSpans[0].resource has no 'service.name'; stored as 'unknown_service'"]
