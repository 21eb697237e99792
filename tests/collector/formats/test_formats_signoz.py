"""SigNoz trace-detail answers (`collector/formats/signoz.py`).

The fixture `testdata/signoz-waterfall-v2.json` is built to the v2 waterfall answer's shape as repository
SigNoz/signoz defines it: `GetWaterfallSpansForTraceWithMetadataResponse` and `model.Span` in
`pkg/query-service/model/response.go` (commit db040702de76b74c5b9a8eaecbae8d83963fcd2f), filled by
`GetWaterfallSpansForTraceWithMetadata` in `pkg/query-service/app/clickhouseReader/reader.go` (start `timestamp` in
milliseconds, `durationNano`, events as objects), with kinds, status names and references as SigNoz's collector
writes them (SigNoz/signoz-otel-collector `exporter/clickhousetracesexporter/clickhouse_exporter_v3.go`). The v3
answer (`pkg/types/spantypes/waterfall_span.go`, commit 05644ed43ad2cba9d489d85abc5ac095d233b13c) and the v1 rows
(`SearchTracesV2` and `SearchSpanResponseItem.GetValues`) are derived from it here, field by field, so every shape
must give the same spans.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from formats_kit import json_spans, saved
from zipkin_kit import TESTDATA, attributes

from collector.formats import FormatError, Rejected, detect_format
from hotspan.importer import StoreSink, import_paths
from storage.clickhouse import ClickHouse
from storage.writer import ClickHouseTraceWriter

SIGNOZ = TESTDATA / "signoz-waterfall-v2.json"
TRACE_ID = "3f2a9c1e7b4d4e8a9c0b1d2e3f4a5b6c"
MS = 1_000_000
START_MS = 1733324400000


def v2_answer() -> dict[str, Any]:
    return json.loads(SIGNOZ.read_text())


def as_v3(span: dict[str, Any]) -> dict[str, Any]:
    """A v2 span as the v3 answer writes it (`WaterfallSpan`'s snake_case keys): typed attributes, the resource
    apart (here `service.name` and `host.name`, which the v2 `tagMap` merged in), the parent as `parent_span_id`,
    no kind number (`json:"-"`), the status number beside its name."""
    tags = dict(span["tagMap"])
    resource = {key: tags.pop(key) for key in ("service.name", "host.name") if key in tags}
    typed = {key: int(value) if value.isdigit() else value for key, value in tags.items()}
    parent = next((ref["spanId"] for ref in span["references"] if ref["refType"] == "CHILD_OF"), "")
    return {
        "attributes": typed,
        "duration_nano": span["durationNano"],
        "events": span["event"],
        "flags": 0,
        "has_error": span["hasError"],
        "is_remote": "unknown",
        "kind_string": span["spanKind"],
        "name": span["name"],
        "parent_span_id": parent,
        "resource": resource,
        "span_id": span["spanId"],
        "time_unix": span["timestamp"],
        "trace_id": span["traceId"],
        "trace_state": "",
        "status_code": {"Unset": 0, "Ok": 1, "Error": 2}[span["statusCodeString"]],
        "status_code_string": span["statusCodeString"],
        "status_message": span["statusMessage"],
        "sub_tree_node_count": span["subTreeNodeCount"],
        "has_children": span["hasChildren"],
        "level": span["level"],
    }


def as_v1_row(span: dict[str, Any]) -> list[Any]:
    """A v2 span as a v1 row (`GetValues`): kind and duration as text, tags as key and value arrays, references
    printed `{TraceId=..., SpanId=..., RefType=...}`, events as JSON strings."""
    references = [
        f"{{TraceId={r['traceId']}, SpanId={r['spanId']}, RefType={r['refType']}}}" for r in span["references"]
    ]
    return [
        span["timestamp"],
        span["spanId"],
        span["traceId"],
        span["serviceName"],
        span["name"],
        str(span["kind"]),
        str(span["durationNano"]),
        list(span["tagMap"]),
        list(span["tagMap"].values()),
        references,
        [json.dumps(event) for event in span["event"]],
        span["hasError"],
        span["statusMessage"],
        span["statusCodeString"],
        span["spanKind"],
    ]


V1_COLUMNS = [
    "__time",
    "SpanId",
    "TraceId",
    "ServiceName",
    "Name",
    "Kind",
    "DurationNano",
    "TagsKeys",
    "TagsValues",
    "References",
    "Events",
    "HasError",
    "StatusMessage",
    "StatusCodeString",
    "SpanKind",
]


def test_v2_waterfall_converts_ids_times_kinds_and_parents() -> None:
    spans, rejected = json_spans(SIGNOZ)
    by_name = {span["name"]: span for span in spans}
    root, client, server, internal = (
        by_name[name] for name in ("POST /api/chat", "POST backend/generate", "generate", "retrieve context")
    )

    assert detect_format(SIGNOZ) == "signoz"
    assert rejected == []
    assert {span["traceId"] for span in spans} == {TRACE_ID}
    assert [root["kind"], client["kind"], server["kind"], internal["kind"]] == [2, 3, 2, 1]
    assert "parentSpanId" not in root  # its CHILD_OF reference names no span
    assert (client["parentSpanId"], server["parentSpanId"], internal["parentSpanId"]) == (
        root["spanId"],
        client["spanId"],
        server["spanId"],
    )
    # Start in milliseconds, duration in nanoseconds.
    assert (root["startTimeUnixNano"], root["endTimeUnixNano"]) == (str(START_MS * MS), str(START_MS * MS + 850 * MS))
    assert server["startTimeUnixNano"] == str((START_MS + 8) * MS)
    # The FOLLOWS_FROM reference is a link.
    assert internal["links"] == [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}]


def test_v2_waterfall_status_events_attributes_and_resource() -> None:
    spans, _ = json_spans(SIGNOZ)
    by_name = {span["name"]: span for span in spans}
    root, server = by_name["POST /api/chat"], by_name["generate"]

    assert server["status"] == {"code": 2, "message": "model timed out"}
    assert "status" not in root
    [event] = server["events"]
    assert event["name"] == "exception" and event["timeUnixNano"] == str(START_MS * MS + 797_500_000)
    assert attributes(event) == {
        "exception.type": {"stringValue": "TimeoutError"},
        "exception.message": {"stringValue": "model timed out"},
    }
    # tagMap holds the resource attributes too; only service.name goes (to the resource), values stay text.
    assert attributes(root) == {
        "http.request.method": {"stringValue": "POST"},
        "http.response.status_code": {"stringValue": "200"},
        "host.name": {"stringValue": "web-1"},
    }
    assert root["resource"] == {"service.name": {"stringValue": "frontend"}}
    assert server["resource"] == {"service.name": {"stringValue": "backend"}}


def test_v3_and_v1_answers_give_the_same_spans(tmp_path: Path) -> None:
    answer = v2_answer()
    v2_spans, _ = json_spans(SIGNOZ)
    v3 = {**{k: v for k, v in answer.items() if k != "spans"}, "spans": [as_v3(span) for span in answer["spans"]]}
    v1 = [{"columns": V1_COLUMNS, "events": [as_v1_row(span) for span in answer["spans"]], "isSubTree": False}]

    v3_spans, v3_rejected = json_spans(saved(tmp_path, v3, "v3.json"))
    v1_spans, v1_rejected = json_spans(saved(tmp_path, v1, "v1.json"))

    assert detect_format(tmp_path / "v3.json") == detect_format(tmp_path / "v1.json") == "signoz"
    assert v3_rejected == v1_rejected == []
    assert v1_spans == v2_spans
    # v3 keeps the resource apart and the attributes typed; everything else is the same.
    for v2_span, v3_span in zip(v2_spans, v3_spans, strict=True):
        assert {k: v for k, v in v3_span.items() if k not in ("attributes", "resource", "links")} == {
            k: v for k, v in v2_span.items() if k not in ("attributes", "resource", "links")
        }
    root = v3_spans[0]
    assert root["resource"] == {"service.name": {"stringValue": "frontend"}, "host.name": {"stringValue": "web-1"}}
    assert attributes(root)["http.response.status_code"] == {"intValue": "200"}


def test_events_stored_as_json_text_are_read_alike(tmp_path: Path) -> None:
    # Older model.Span versions send `event` as the JSON strings SigNoz's collector stores.
    answer = v2_answer()
    for span in answer["spans"]:
        span["event"] = [json.dumps(event) for event in span["event"]]

    spans, rejected = json_spans(saved(tmp_path, answer))

    assert rejected == [] and spans == json_spans(SIGNOZ)[0]


def test_a_broken_span_is_rejected_and_the_rest_imported(tmp_path: Path) -> None:
    answer = v2_answer()
    answer["spans"][2]["durationNano"] = "soon"
    # A nanosecond start where SigNoz sends milliseconds.
    answer["spans"][3]["timestamp"] = START_MS * MS
    path = saved(tmp_path, answer)

    spans, rejected = json_spans(path)

    assert [span["name"] for span in spans] == ["POST /api/chat", "POST backend/generate"]
    assert rejected == [
        Rejected(f"{path}#/spans/2", "durationNano 'soon' is not a non-negative integer number of nanoseconds", 1),
        Rejected(
            f"{path}#/spans/3",
            f"timestamp {START_MS * MS} is not milliseconds since the epoch (SigNoz sends milliseconds)",
            1,
        ),
    ]


def test_missing_span_placeholders_are_skipped(tmp_path: Path) -> None:
    # GetWaterfallSpansForTraceWithMetadata adds a "Missing Span" for a parent it has no data for.
    answer = v2_answer()
    orphan = answer["spans"][1]
    placeholder = copy.deepcopy(orphan)
    placeholder.update(
        spanId="a1b2c3d4e5f600ff",
        name="Missing Span",
        serviceName="",
        kind=0,
        spanKind="",
        references=None,
        tagMap=None,
    )
    orphan["references"] = [{"traceId": TRACE_ID, "spanId": "a1b2c3d4e5f600ff", "refType": "CHILD_OF"}]
    answer["spans"] = [answer["spans"][0], placeholder, *answer["spans"][1:]]
    answer["hasMissingSpans"] = True

    spans, rejected = json_spans(saved(tmp_path, answer))

    assert rejected == [] and len(spans) == 4
    assert next(span for span in spans if span["spanId"] == orphan["spanId"])["parentSpanId"] == "a1b2c3d4e5f600ff"


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"spans": [[{"spanId": "a1b2c3d4e5f60001", "durationNano": 5, "level": 0}]]}, "SigNoz's flamegraph answer"),
        ({"spans": [{"traceId": TRACE_ID, "durationNano": 5, "tagMap": {}}]}, "but its first span has no 'spanId'"),
    ],
    ids=["flamegraph", "no-span-id"],
)
def test_signoz_lookalikes_are_refused_by_name(tmp_path: Path, document: object, says: str) -> None:
    with pytest.raises(FormatError) as refused:
        detect_format(saved(tmp_path, document, "signoz.json"))

    assert says in str(refused.value)


def test_import_twice_stores_nothing_twice(store: ClickHouse, tmp_path: Path) -> None:
    answer = v2_answer()
    answer["spans"][3]["spanId"] = "not-hex"
    path = saved(tmp_path, answer)
    sink = StoreSink(ClickHouseTraceWriter(store))

    first = import_paths([path], sink, progress=False)
    second = import_paths([path], sink, progress=False)

    assert (first.spans, len(first.traces), len(first.services)) == (3, 1, 2)
    assert (first.rejected, second.rejected) == (1, 1) and "spanId 'not-hex'" in first.problems[0]
    assert second.spans == first.spans
    assert store.query_rows("SELECT count(), uniqExact(SpanId) FROM otel_traces")[0] == (3, 3)
