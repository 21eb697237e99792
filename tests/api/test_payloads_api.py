"""Deleting a trace's message payloads (``DELETE /api/v1/payloads/traces/{id}``, issue 32) on a served Hotspan.

Two real libraries' captures go in over OTLP/HTTP: OpenInference's OpenAI instrumentation (messages as flattened
span attributes, ``llm.input_messages.*``, and ``input.value``) and Strands (the deprecated GenAI message events).
A deletion must remove exactly the payloads the redaction table names from the one trace asked for, keep
everything else of it (span count, timings, token counts, event names), mark the spans it changed, reach a trace
page view read before it (the view cache), delete nothing the second time, and answer 404 / 400 for an unknown
or malformed ID."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest

from analysis.messages import span_messages
from collector.redaction import Redactor, packaged_table
from dashboards.format import attribute_dict
from hotspan.server import RunningServer
from storage.payloads import DELETED_KEY

CAPTURES = Path(__file__).resolve().parents[1] / "realworld" / "captures"
REDACTOR = Redactor(packaged_table())
PAYLOAD_KEY = re.compile(REDACTOR.key_regex)


def _post_capture(server: RunningServer, driver: str) -> dict[str, int]:
    """Send ``driver``'s capture over OTLP/HTTP JSON; its spans per trace ID (hex)."""
    body = json.loads((CAPTURES / driver / "engine-off-nostream.json").read_text())
    answer = httpx.post(f"{server.base_url}/v1/traces", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    counts: dict[str, int] = {}
    for resource in body["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                counts[span["traceId"].lower()] = counts.get(span["traceId"].lower(), 0) + 1
    return counts


def _spans(server: RunningServer, trace: str, expected: int) -> list[dict]:
    """The trace's spans from the REST API once ``expected`` are stored (60 s deadline)."""
    deadline = time.monotonic() + 60
    while True:
        answer = httpx.get(f"{server.base_url}/api/v1/traces/{trace}", timeout=30)
        spans = answer.json()["spans"] if answer.status_code == 200 else []
        if len(spans) == expected:
            return spans
        if time.monotonic() > deadline:
            pytest.fail(f"{len(spans)} of {expected} spans of {trace} readable within 60 s")
        time.sleep(0.1)


def _payload_spans(spans: list[dict]) -> int:
    """Spans holding a payload the packaged table names (attribute or message event)."""
    return sum(
        any(PAYLOAD_KEY.fullmatch(key) for key in span["attributes"])
        or any(REDACTOR.wanted_event(event["name"]) and event["attributes"] for event in span["events"])
        or any(PAYLOAD_KEY.fullmatch(key) for event in span["events"] for key in event["attributes"])
        for span in spans
    )


def _view_messages(server: RunningServer, trace: str) -> int:
    """Messages the trace page's view (``query.trace_view_cache``) shows over all spans."""
    assert server.query is not None
    view = server.query.views.load(trace, tenant="default")
    assert view is not None
    count = 0
    for row in view.spans.iter_rows(named=True):
        events = list(zip(row["event_names"] or [], map(attribute_dict, row["event_attributes"] or []), strict=False))
        count += len(span_messages(attribute_dict(row["attributes"]), events).messages)
    return count


def _delete(server: RunningServer, trace: str) -> httpx.Response:
    return httpx.delete(f"{server.base_url}/api/v1/payloads/traces/{trace}", timeout=60)


@pytest.mark.both_layouts
def test_a_traces_payloads_are_deleted_and_nothing_else(hotspan_server: RunningServer) -> None:
    server = hotspan_server
    flattened = _post_capture(server, "openinference_openai")
    events = _post_capture(server, "strands")
    trace, size = sorted(flattened.items())[0]
    other, other_size = sorted(events.items())[0]
    before = _spans(server, trace, size)
    other_before = _spans(server, other, other_size)
    held = _payload_spans(before)
    assert held >= 2 and _payload_spans(other_before) >= 2
    assert _view_messages(server, trace) > 0  # the view is built and kept before the deletion

    answer = _delete(server, trace)

    assert answer.status_code == 200, answer.text
    assert answer.json() == {"trace_ids": [trace], "spans": held}
    after = _spans(server, trace, size)
    assert _payload_spans(after) == 0
    by_id = {span["span_id"]: span for span in before}
    for span in after:
        kept = {k: v for k, v in by_id[span["span_id"]]["attributes"].items() if not PAYLOAD_KEY.fullmatch(k)}
        changed = kept != by_id[span["span_id"]]["attributes"]
        assert {k: v for k, v in span["attributes"].items() if k != DELETED_KEY} == kept
        assert (span["attributes"].get(DELETED_KEY) == "true") == changed
        assert span["duration_ns"] == by_id[span["span_id"]]["duration_ns"]
    assert any("llm.token_count.prompt" in span["attributes"] for span in after)  # usage stays
    assert _view_messages(server, trace) == 0  # the kept view was read again
    assert _spans(server, other, other_size) == other_before  # another trace is untouched

    assert _delete(server, trace).json() == {"trace_ids": [trace], "spans": 0}
    answer = _delete(server, other)
    assert answer.status_code == 200 and answer.json()["spans"] == _payload_spans(other_before)
    other_after = _spans(server, other, other_size)
    assert _payload_spans(other_after) == 0
    assert [[e["name"] for e in s["events"]] for s in other_after] == [
        [e["name"] for e in s["events"]] for s in other_before
    ]


def test_an_unknown_or_malformed_trace_is_refused(hotspan_server: RunningServer) -> None:
    missing = _delete(hotspan_server, "ab" * 16)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert _delete(hotspan_server, "not-a-trace").status_code == 400
