"""Redaction on the served ingest path (issue 32): OTLP/HTTP into an in-process Hotspan on the session's embedded
ClickHouse, the stored rows read back, the counter read from ``/metrics``. Real parts only: the receiver, the spool,
the compiled scanner (clean requests) and the Python reference (a request with an unreadable span)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from collector.redaction import REDACTED_KEY
from hotspan.server import RunningServer
from testkit import serve_in_process

BASE_NS = 1_700_000_000 * 10**9
CARD = "4111 1111 1111 1111"
"""Luhn-valid (the card networks' published test number)."""
ORDER_ID = "4111111111111112"
"""16 digits, Luhn checksum fails."""
PROMPT = f"I am jane.roe@example.org, card {CARD}, order {ORDER_ID}, ticket EMP-123456"


def span(trace: str, index: int, attributes: dict[str, str], event: dict[str, str] | None = None) -> dict:
    fields: dict = {
        "traceId": trace,
        "spanId": f"{index:016x}",
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": str(BASE_NS + index),
        "endTimeUnixNano": str(BASE_NS + index + 10**6),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }
    if event:
        attrs = [{"key": k, "value": {"stringValue": v}} for k, v in event.items()]
        fields["events"] = [
            {"timeUnixNano": str(BASE_NS + index), "name": "gen_ai.content.prompt", "attributes": attrs}
        ]
    return fields


def export(server: RunningServer, spans: list[dict]) -> dict:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "chat"}}]}
    payload = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    answer = httpx.post(f"{server.base_url}/v1/traces", json=payload, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def stored(server: RunningServer, trace: str, spans: int) -> list[tuple[dict[str, str], list[dict[str, str]]]]:
    """The span attributes and event attributes of ``trace``'s spans, by span ID, once ``spans`` are stored."""
    query = "SELECT SpanAttributes, Events.Attributes FROM otel_traces WHERE TraceId = {t:String} ORDER BY SpanId"
    deadline = time.monotonic() + 60
    while True:
        rows = server.storage.clickhouse.query_rows(query, {"t": trace})
        if len(rows) == spans:
            return [(dict(attributes), [dict(e) for e in events]) for attributes, events in rows]
        if time.monotonic() > deadline:
            pytest.fail(f"{len(rows)} of {spans} spans of {trace} stored within 60 s")
        time.sleep(0.05)


def redacted_counts(server: RunningServer) -> dict[str, float]:
    text = httpx.get(f"{server.base_url}/metrics", timeout=10).text
    return {
        rule: float(value)
        for rule, value in re.findall(r'^hotspan_redacted_values_total\{rule="([^"]+)"\} (\S+)$', text, re.MULTILINE)
    }


@pytest.fixture
def server(chdb_dsn: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    running = serve_in_process(chdb_dsn, tmp_path, "red", grpc_port=-1, **getattr(request, "param", {}))
    yield running
    running.stop()


def test_default_rules_mask_an_email_and_a_card_and_count_them(server: RunningServer) -> None:
    assert redacted_counts(server)["email"] == 0
    clean, mixed = "a1" * 16, "b2" * 16
    export(
        server,
        [
            span(clean, 1, {"gen_ai.input.messages": PROMPT}, event={"gen_ai.prompt": "cc bob@example.com"}),
            span(clean, 2, {"http.request.method": "POST", "user.email": "jane.roe@example.org"}),
        ],
    )
    # An unreadable span sends its request through the Python reference conversion: redacted the same.
    answer = export(server, [span(mixed, 1, {"input.value": "from carol@example.net"}), {"traceId": "zz"}])
    assert answer["partialSuccess"]["rejectedSpans"] == "1"

    (chat, chat_events), (plain, _) = stored(server, clean, 2)
    assert chat["gen_ai.input.messages"] == (
        f"I am [REDACTED:email], card [REDACTED:card_number], order {ORDER_ID}, ticket EMP-123456"
    )
    assert chat_events == [{"gen_ai.prompt": "cc [REDACTED:email]"}]
    assert chat[REDACTED_KEY] == "3"
    assert plain == {"http.request.method": "POST", "user.email": "jane.roe@example.org"}
    [(python_path, _)] = stored(server, mixed, 1)
    assert python_path == {"input.value": "from [REDACTED:email]", REDACTED_KEY: "1"}
    counts = redacted_counts(server)
    assert counts["email"] == 3 and counts["card_number"] == 1 and counts["api_key"] == 0


@pytest.mark.parametrize("server", [{"redaction": "off"}], indirect=True)
def test_off_stores_messages_as_sent(server: RunningServer) -> None:
    trace = "c3" * 16
    export(server, [span(trace, 1, {"gen_ai.input.messages": PROMPT})])

    [(attributes, _)] = stored(server, trace, 1)
    assert attributes == {"gen_ai.input.messages": PROMPT}
    assert redacted_counts(server) == {}


def test_a_custom_rule_file_adds_a_pattern_and_a_key(chdb_dsn: str, tmp_path: Path) -> None:
    rules = tmp_path / "redaction.yaml"
    rules.write_text("keys: [app.ticket.note]\nrules:\n  - name: employee_id\n    pattern: '\\bEMP-\\d{6}\\b'\n")
    server = serve_in_process(chdb_dsn, tmp_path / "data", "red", grpc_port=-1, redaction=str(rules))
    try:
        trace = "d4" * 16
        export(server, [span(trace, 1, {"gen_ai.input.messages": PROMPT, "app.ticket.note": "by EMP-000042"})])

        [(attributes, _)] = stored(server, trace, 1)
        assert attributes["gen_ai.input.messages"] == (
            f"I am [REDACTED:email], card [REDACTED:card_number], order {ORDER_ID}, ticket [REDACTED:employee_id]"
        )
        assert attributes["app.ticket.note"] == "by [REDACTED:employee_id]"
        assert redacted_counts(server)["employee_id"] == 2
    finally:
        server.stop()
