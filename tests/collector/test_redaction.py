"""The redaction table and :class:`collector.redaction.Redactor` on real OTLP protobuf requests: which keys, which
rules, structured values, span events, the span marker, the scanner's prefilter and the conversion around it, and
the YAML table's validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector import _otlp_rows
from collector.batch import to_batch
from collector.batchwriter import UnreadableRequestError
from collector.limits import SpanLimits
from collector.native_writer import REDACTION_CANDIDATE, RequestConverter, native_rows
from collector.otlp_json import request_from_json
from collector.redaction import (
    REDACTED_KEY,
    RedactionRulesError,
    Redactor,
    literal_starts,
    load_redaction,
    luhn_valid,
    packaged_table,
)

VISA_TEST = "4111 1111 1111 1111"
"""A Luhn-valid card number (the card networks' published test number)."""
ORDER_ID = "4111111111111112"
"""16 digits whose Luhn checksum fails: an order id, not a card."""


def request(attributes: dict[str, object], events: list[dict[str, object]] | None = None) -> ExportTraceServiceRequest:
    """One span of service ``chat`` with ``attributes`` (str values as strings, lists and dicts as OTLP arrays and
    key-value lists) and ``events`` (each a dict of event attributes)."""
    span = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": key, "value": _any(value)} for key, value in attributes.items()],
        "events": [
            {
                "timeUnixNano": "1700000000500000000",
                "name": "gen_ai.content.prompt",
                "attributes": [{"key": k, "value": _any(v)} for k, v in event.items()],
            }
            for event in events or []
        ],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "chat"}}]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}
    decoded, rejections = request_from_json(body)
    assert not rejections
    return decoded


def _any(value: object) -> dict[str, object]:
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any(item) for item in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _any(v)} for k, v in value.items()]}}
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": value}


def stored(req: ExportTraceServiceRequest) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The span's attributes and event attributes as the reference conversion stores them."""
    row = to_batch(req).table.to_pylist()[0]
    return dict(row["SpanAttributes"]), [dict(items) for items in row["Events.Attributes"]]


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(packaged_table())


def test_default_rules_mask_secrets_in_message_attributes_only(redactor: Redactor) -> None:
    prompt = (
        f"I am jane.roe@example.org, card {VISA_TEST}, order {ORDER_ID}; header Authorization: Bearer "
        "eyJhbGciOiJIUzI1NiJ9.e30.sig; keys sk-proj-abcdefghijklmnopqrstuvwxyz012345 and AKIAIOSFODNN7EXAMPLE"
    )
    req = request({"gen_ai.input.messages": prompt, "user.email": "jane.roe@example.org"})

    masked = redactor.redact_request(req)

    attributes, _ = stored(req)
    assert attributes["gen_ai.input.messages"] == (
        f"I am [REDACTED:email], card [REDACTED:card_number], order {ORDER_ID}; header Authorization: "
        "[REDACTED:bearer_token]; keys [REDACTED:api_key] and [REDACTED:aws_key]"
    )
    # A key the table does not name is not message payload: left as sent.
    assert attributes["user.email"] == "jane.roe@example.org"
    assert attributes[REDACTED_KEY] == "5"
    assert masked == {"email": 1, "card_number": 1, "bearer_token": 1, "api_key": 1, "aws_key": 1}


def test_structured_values_events_and_openinference_keys(redactor: Redactor) -> None:
    """GenAI semconv allows ``gen_ai.input.messages`` as structured AnyValue; the deprecated prompt event carries
    ``gen_ai.prompt``; OpenInference flattens messages into ``llm.input_messages.<i>.message.content``."""
    messages = [{"role": "user", "parts": [{"type": "text", "content": "write to bob@example.com"}]}]
    req = request(
        {
            "gen_ai.input.messages": messages,
            "llm.input_messages.0.message.content": "cc carol@example.net",
            "llm.input_messages.0.message.role": "user",
            "input.value": '{"q": "dave@example.io"}',
        },
        events=[{"gen_ai.prompt": "from erin@example.com"}, {"other": "frank@example.com"}],
    )

    masked = redactor.redact_request(req)

    attributes, events = stored(req)
    assert "[REDACTED:email]" in attributes["gen_ai.input.messages"]
    assert "bob@" not in attributes["gen_ai.input.messages"]
    assert attributes["llm.input_messages.0.message.content"] == "cc [REDACTED:email]"
    assert attributes["llm.input_messages.0.message.role"] == "user"
    assert attributes["input.value"] == '{"q": "[REDACTED:email]"}'
    assert events == [{"gen_ai.prompt": "from [REDACTED:email]"}, {"other": "frank@example.com"}]
    assert attributes[REDACTED_KEY] == "4"
    assert masked == {"email": 4}


def test_deprecated_genai_message_events_are_redacted_whole(redactor: Redactor) -> None:
    """The deprecated GenAI events keep the message under plain keys (Strands writes ``content`` in Bedrock's
    shape, ``gen_ai.choice`` its ``message``): every attribute of a named event is redacted, the same key on
    another event is not, and such an event alone makes a request a candidate of the scanner's prefilter."""
    req = request({"http.request.method": "POST"})
    span = req.resource_spans[0].scope_spans[0].spans[0]
    written = {
        "gen_ai.user.message": {"content": '[{"text": "mail ann@example.com"}]'},
        "gen_ai.choice": {"message": '[{"text": "sent to ann@example.com"}]', "finish_reason": "end_turn"},
        "exception": {"content": "raised for ann@example.com"},
    }
    for name, attributes in written.items():
        event = span.events.add(name=name, time_unix_nano=1_700_000_000_500_000_000)
        for key, value in attributes.items():
            event.attributes.add(key=key).value.string_value = value
    body = req.SerializeToString()

    assert native_rows(body, "default", SpanLimits(), redactor) == REDACTION_CANDIDATE
    masked = redactor.redact_request(req)

    _, events = stored(req)
    assert events == [
        {"content": '[{"text": "mail [REDACTED:email]"}]'},
        {"message": '[{"text": "sent to [REDACTED:email]"}]', "finish_reason": "end_turn"},
        {"content": "raised for ann@example.com"},
    ]
    assert masked == {"email": 2}


def test_a_request_without_matches_is_left_unchanged(redactor: Redactor) -> None:
    req = request({"gen_ai.input.messages": "where is my order?", "gen_ai.usage.input_tokens": 12})
    before = req.SerializeToString()

    assert redactor.redact_request(req) == {}
    assert req.SerializeToString() == before
    body, masked = redactor.redact_body(before)
    assert body is before and masked == {}


def test_a_named_request_protobuf_cannot_read_is_reported_and_none_of_it_stored(redactor: Redactor) -> None:
    """The scanner names a request at its first named key, before it reads what follows; when protobuf cannot read the
    rest (nor so the redaction), the Python reference reports the request unread and nothing of it is stored."""
    body = request({"output.value": "mail jane@example.org"}).SerializeToString() + b"\x0a\xff"

    assert native_rows(body, "default", SpanLimits(), redactor) == REDACTION_CANDIDATE
    assert redactor.redact_body(body) == (None, {})
    batch = RequestConverter(SpanLimits(), redactor).convert([(body, "default")], [[]])
    assert isinstance(batch.results[0], UnreadableRequestError)
    assert not batch.native_rows and not batch.python_tables and batch.redacted == {}


def test_the_scanner_converts_requests_without_a_named_key_and_names_the_others(redactor: Redactor) -> None:
    """The prefilter is the scanner's: a request whose keys none of the literal starts begins is converted at once
    (an e-mail address under another key stays), one with a named key is redacted, then converted."""
    plain = request({"http.request.method": "POST", "note": "jane@example.org"}).SerializeToString()
    chat = request({"output.value": "mail jane@example.org"}).SerializeToString()

    assert isinstance(native_rows(plain, "default", SpanLimits(), redactor), tuple)
    assert native_rows(chat, "default", SpanLimits(), redactor) == REDACTION_CANDIDATE
    assert isinstance(native_rows(chat, "default", SpanLimits()), tuple)
    batch = RequestConverter(SpanLimits(), redactor).convert([(plain, "default"), (chat, "default")], [[], []])
    assert batch.redacted == {"email": 1} and not batch.python_tables
    assert batch.native_rows.count(b"jane@example.org") == 1
    assert b"mail [REDACTED:email]" in batch.native_rows


def test_a_request_the_scanner_leaves_before_its_named_key_is_stored_redacted(redactor: Redactor) -> None:
    """The scanner stops at a request's first anomaly (here a key-value list value, which only the Python reference
    stores), which can come before any named key: the Python reference then stores it redacted all the same."""
    body = request(
        {"app.context": {"tenant": "acme"}, "gen_ai.input.messages": "mail jane@example.org"}
    ).SerializeToString()

    converted = native_rows(body, "default", SpanLimits(), redactor)
    assert isinstance(converted, str) and converted != REDACTION_CANDIDATE
    batch = RequestConverter(SpanLimits(), redactor).convert([(body, "default")], [[]])
    assert batch.redacted == {"email": 1} and not batch.native_rows
    (table,) = batch.python_tables
    assert dict(table.column("SpanAttributes")[0].as_py())["gen_ai.input.messages"] == "mail [REDACTED:email]"


def test_the_literal_starts_begin_every_named_key_and_no_common_lookalike() -> None:
    """Every key and event name of the packaged table begins with one of its literal starts; keys that merely share a
    part with one (OTel's exception event, GenAI's provider and conversation attributes, Anthropic's route) do not;
    and no literal start begins another (the scanner's binary search needs it)."""
    table = packaged_table()
    starts = literal_starts(table.keys + table.events)
    assert list(starts) == sorted(starts)
    assert not any(b.startswith(a) for a in starts for b in starts if a != b)
    for name in table.keys + table.events:
        assert name.replace("*", "0.content").encode().startswith(starts), name
    for lookalike in (
        "exception.message",
        "gen_ai.system",
        "gen_ai.conversation.id",
        "/v1/messages",
        "gen_ai.tool.name",
    ):
        assert not lookalike.encode().startswith(starts), lookalike


@pytest.mark.parametrize(
    ("digits", "valid"),
    [("4111111111111111", True), ("5555555555554444", True), ("378282246310005", True), (ORDER_ID, False)],
)
def test_luhn(digits: str, valid: bool) -> None:
    assert luhn_valid(digits) is valid


def test_a_custom_table_adds_keys_and_rules_to_the_packaged_one(tmp_path: Path) -> None:
    path = tmp_path / "redaction.yaml"
    path.write_text(
        "version: 1\nkeys: [app.user_note]\nrules:\n  - name: employee_id\n    pattern: '\\bEMP-\\d{6}\\b'\n"
    )
    table = load_redaction(path)
    assert table is not None
    req = request({"app.user_note": "EMP-123456 at x@example.com", "gen_ai.prompt": "EMP-654321"})

    Redactor(table).redact_request(req)

    attributes, _ = stored(req)
    assert attributes["app.user_note"] == "[REDACTED:employee_id] at [REDACTED:email]"
    assert attributes["gen_ai.prompt"] == "[REDACTED:employee_id]"


def test_defaults_false_keeps_only_the_files_rules(tmp_path: Path) -> None:
    path = tmp_path / "only.yaml"
    path.write_text("defaults: false\nkeys: [app.user_note]\nrules:\n  - name: ticket\n    pattern: 'T-\\d+'\n")
    table = load_redaction(path)
    assert table is not None and [rule.name for rule in table.rules] == ["ticket"]
    assert table.keys == ["app.user_note"]


def test_off_and_default() -> None:
    assert load_redaction("off") is None
    assert load_redaction("default") == packaged_table()


def test_an_invalid_table_lists_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "keys: ['a.*']\nrules:\n  - name: Bad Name\n    pattern: 'x'\n  - name: lookaround\n    pattern: '(?<=a)b'\n"
        "  - name: empty\n    pattern: 'x*'\n  - name: unknown\n    pattern: 'y'\n    check: crc\n"
    )
    with pytest.raises(RedactionRulesError) as caught:
        load_redaction(path)
    issues = "\n".join(caught.value.issues)
    assert len(caught.value.issues) == 5, issues
    assert "keys" in issues and "rules[0].name" in issues and "RE2" in issues and "empty string" in issues
    assert "rules[3].check" in issues


NAME_TEXT = st.text(alphabet="ab.é", min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(NAME_TEXT, min_size=1, max_size=6), keys=st.lists(NAME_TEXT, max_size=6, unique=True))
def test_the_scanner_names_a_request_exactly_when_a_literal_start_begins_one_of_its_keys(
    names: list[str], keys: list[str]
) -> None:
    """The scanner's binary search against ``str.startswith``: a span with ``keys`` (multi-byte UTF-8 among them) is a
    candidate exactly when one of ``names`` begins one of them, whichever names begin others."""
    req = request({key: "v" for key in keys})
    limits = SpanLimits()
    converted = _otlp_rows.convert(
        req.SerializeToString(),
        "default",
        limits.max_attributes,
        limits.max_value_chars,
        limits.max_events,
        limits.max_links,
        literal_starts(names),
        (),
    )
    named = any(key.startswith(name) for key in keys for name in names)
    assert (converted == REDACTION_CANDIDATE) is named, converted
