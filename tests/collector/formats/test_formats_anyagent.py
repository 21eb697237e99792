"""any-agent `AgentTrace` files (`collector/formats/anyagent.py`).

The fixture `testdata/anyagent-trace.json` is built to the shape of repository mozilla-ai/any-agent's
`AgentTrace.model_dump_json()`: `AgentTrace` and `AgentSpan` in `src/any_agent/tracing/agent_trace.py` (commit
1f4b1cccfd07571e2cfd00edf416bb153a39c595), their value types from mozilla-ai/tinyagent
`src/tinyagent/tracing/otel_types.py` (commit 3c6ceac1cda24bb71e3a001ba4b5d64ffaf841d9), laid out like any-agent's
own `tests/assets/TINYAGENT_trace.json` (commit 0020b6a7bb51c17580392402957717b8ec54e85d): decimal integer IDs,
nanosecond times, lower-case kinds and status codes, the `invoke_agent` root last and its `parent` IDs null.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from formats_kit import json_spans, saved
from zipkin_kit import TESTDATA, attributes

from analysis import analyze
from analysis.model_calls import model_calls
from collector.formats import FormatError, Rejected, detect_format
from hotspan.importer import StoreSink, import_paths
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter

ANYAGENT = TESTDATA / "anyagent-trace.json"
TRACE_ID = "7c3e5a9b1d2f4c6e8a0b2d4f6a8c0e1f"
ROOT_ID = "9f1e2d3c4b5a6001"


def trace() -> dict[str, Any]:
    return json.loads(ANYAGENT.read_text())


def test_agent_trace_converts_ids_times_and_the_tree() -> None:
    spans, rejected = json_spans(ANYAGENT)
    original = trace()["spans"]

    assert detect_format(ANYAGENT) == "any-agent"
    assert rejected == []
    assert [span["name"] for span in spans] == [span["name"] for span in original]
    # Decimal 128- and 64-bit integers become 32 and 16 hex digits.
    assert {span["traceId"] for span in spans} == {TRACE_ID}
    assert [span["spanId"] for span in spans] == [format(span["context"]["span_id"], "016x") for span in original]
    root = spans[-1]
    assert root["spanId"] == ROOT_ID and "parentSpanId" not in root  # its parent's IDs are null
    assert all(span["parentSpanId"] == ROOT_ID for span in spans[:-1])
    assert all(span["kind"] == 1 for span in spans)
    # Nanoseconds in, nanoseconds out.
    assert [(span["startTimeUnixNano"], span["endTimeUnixNano"]) for span in spans] == [
        (str(span["start_time"]), str(span["end_time"])) for span in original
    ]


def test_agent_trace_status_events_attributes_and_resource() -> None:
    spans, _ = json_spans(ANYAGENT)
    llm, tool, _, root = spans

    assert llm["status"] == {"code": 1} and "status" not in root
    assert tool["status"] == {"code": 2, "message": "order service timed out after 350 ms"}
    [event] = tool["events"]
    assert event["name"] == "exception" and attributes(event)["exception.escaped"] == {"boolValue": False}
    # Attributes keep their JSON types: the GenAI token counts are integers, the costs doubles.
    assert attributes(llm)["gen_ai.operation.name"] == {"stringValue": "call_llm"}
    assert attributes(llm)["gen_ai.usage.input_tokens"] == {"intValue": "313"}
    assert attributes(llm)["gen_ai.usage.input_cost"] == {"doubleValue": 0.0001252}
    assert root["resource"]["service.name"] == {"stringValue": "support-agent"}
    assert root["resource"]["telemetry.sdk.version"] == {"stringValue": "1.33.1"}


def test_bare_span_list_links_and_trace_state(tmp_path: Path) -> None:
    spans = trace()["spans"]
    spans[0]["links"] = [{"context": spans[1]["context"], "attributes": {"link.reason": "retry-of"}}]
    spans[0]["context"]["trace_state"] = {"entries": {"vendor": "abc"}}

    converted, rejected = json_spans(saved(tmp_path, spans))

    assert rejected == []
    assert converted[0]["links"] == [
        {
            "traceId": TRACE_ID,
            "spanId": "9f1e2d3c4b5a6003",
            "attributes": [{"key": "link.reason", "value": {"stringValue": "retry-of"}}],
        }
    ]
    assert converted[0]["traceState"] == "vendor=abc"


def test_a_broken_span_is_rejected_and_the_rest_imported(tmp_path: Path) -> None:
    document = trace()
    document["spans"][1]["end_time"] = None
    document["spans"][2]["context"]["span_id"] = "e1b2c3d4e5f60718"
    path = saved(tmp_path, document)

    spans, rejected = json_spans(path)

    assert [span["name"] for span in spans] == ["call_llm gpt-4.1-mini", "invoke_agent [support_agent]"]
    assert rejected == [
        Rejected(f"{path}#/spans/1", "end_time is null: the span's time is unknown", 1),
        Rejected(f"{path}#/spans/2", "context.span_id 'e1b2c3d4e5f60718' is not a 64-bit integer ID", 1),
    ]


def test_spans_without_start_time_are_refused_by_name(tmp_path: Path) -> None:
    document = trace()
    for span in document["spans"]:
        del span["start_time"]

    with pytest.raises(FormatError) as refused:
        detect_format(saved(tmp_path, document))

    assert "an any-agent AgentTrace (spans with context.trace_id), but its first span has no 'start_time'" in str(
        refused.value
    )


def test_import_twice_stores_nothing_twice(store: ClickHouse, tmp_path: Path) -> None:
    document = trace()
    document["spans"][0]["kind"] = "sideways"
    path = saved(tmp_path, document)
    sink = StoreSink(ClickHouseTraceWriter(store))

    first = import_paths([path], sink, progress=False)
    second = import_paths([path], sink, progress=False)

    assert (first.spans, len(first.traces), len(first.services), first.rejected) == (3, 1, 1, 1)
    assert "kind 'sideways' is not a span kind" in first.problems[0]
    assert (second.spans, second.rejected) == (first.spans, first.rejected)
    assert store.query_rows("SELECT count(), uniqExact(SpanId) FROM otel_traces")[0] == (3, 3)


def test_call_llm_spans_are_model_calls_with_their_tokens(store: ClickHouse) -> None:
    import_paths([ANYAGENT], StoreSink(ClickHouseTraceWriter(store)), progress=False)
    stored = ClickHouseTraceReader(store).trace(TRACE_ID, tenant=ALL_TENANTS)

    calls = model_calls(analyze(stored))

    assert calls.select("span_id", "model", "input_tokens", "output_tokens").rows() == [
        ("9f1e2d3c4b5a6002", "gpt-4.1-mini-2025-04-14", 313, 18),
        ("9f1e2d3c4b5a6004", "gpt-4.1-mini-2025-04-14", 404, 15),
    ]
