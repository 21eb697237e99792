"""A model call's messages (``analysis.messages``) read from what real instrumentation libraries wrote, and shown in
the span detail's messages panel (``dashboards.trace_panels``).

Each library's capture (``tests/realworld/captures/<driver>``, recorded by ``instrumented_stack/realclients``
against the emulator, one support question a trace) goes through the real importer into one chDB database and is
read back by the reader, as the trace page reads it. Per library, :data:`EXPECTED` says what its spans carry:
the system prompt, the user's question, the model's call of the order tool. Libraries that record no content by
default (Agent Framework, the Anthropic SDK's, ddtrace, Google ADK, Langfuse, MLflow, Claude Code, Codex) must
show no messages rather than something made up.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from dash_support import texts

from analysis.messages import MAX_MESSAGES, MAX_PART_CHARS, Message, span_messages
from analysis.stage_rules import load_stage_rules
from dashboards.format import attribute_dict
from dashboards.trace_panels import span_detail
from instrumented_stack.realclients.common import QUESTIONS, SYSTEM_PROMPT, TOOL_ORDER
from query.trace_model import build_trace_view
from testkit import import_first_trace, migrated_database

CAPTURES = Path(__file__).resolve().parents[1] / "realworld" / "captures"

SYSTEM, QUESTION, TOOL_CALL, ANSWER = "system", "question", "tool call", "answer"
EXPECTED: dict[str, tuple[str, frozenset[str]]] = {
    "langgraph": ("GenAI semantic conventions", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "logfire": ("GenAI semantic conventions", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "openai_v2": ("GenAI semantic conventions", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "openllmetry_anthropic": ("GenAI semantic conventions", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "openllmetry_openai": ("GenAI semantic conventions", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "pydantic_ai": ("GenAI semantic conventions", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "semantic_kernel": ("GenAI semantic conventions", frozenset({ANSWER})),
    "openai_agents": ("OpenInference", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "openinference_anthropic": ("OpenInference", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "openinference_openai": ("OpenInference", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "strands": ("GenAI semantic conventions (events)", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "vercel_ai": ("Vercel AI SDK", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "promptflow": ("Prompt Flow", frozenset({SYSTEM, QUESTION, TOOL_CALL})),
    "langsmith": ("plain value", frozenset({QUESTION})),
}
"""Per library: the convention its model calls' messages are read from, and what its trace shows."""
NO_CONTENT = ("agent_framework", "anthropic_sdk", "ddtrace_llmobs", "google_adk", "langfuse", "mlflow_tracing")
"""Libraries that record no message content by default."""


def _capture(driver: str) -> Path:
    return CAPTURES / driver / "engine-off-nostream.json"


@pytest.fixture(scope="module")
def traces(chdb_dsn: str) -> Iterator[dict[str, pl.DataFrame]]:
    """Each library's first trace, imported and read back: ``{driver: spans}``."""
    with migrated_database(chdb_dsn, "messages") as ch:
        yield {driver: import_first_trace(ch, _capture(driver)) for driver in (*EXPECTED, *NO_CONTENT)}


def _messages(spans: pl.DataFrame) -> list[Message]:
    found = []
    for row in spans.iter_rows(named=True):
        events = [
            (str(name), attribute_dict(attributes))
            for name, attributes in zip(row["event_names"] or [], row["event_attributes"] or [], strict=False)
        ]
        found += span_messages(attribute_dict(row["attributes"]), events).messages
    return found


def _shows(messages: list[Message]) -> set[str]:
    """What of :data:`EXPECTED`'s vocabulary the messages hold."""
    shown = set()
    for message in messages:
        text = " ".join(part.text for part in message.parts)
        if message.direction == "system" and SYSTEM_PROMPT[:60] in text:
            shown.add(SYSTEM)
        if message.direction == "input" and any(question in text for question in QUESTIONS):
            shown.add(QUESTION)
        if message.direction == "output" and any(p.kind == "tool_call" and p.name == TOOL_ORDER for p in message.parts):
            shown.add(TOOL_CALL)
        if message.direction == "output" and any(p.kind == "text" and p.text for p in message.parts):
            shown.add(ANSWER)
    return shown


@pytest.mark.parametrize("driver", sorted(EXPECTED))
def test_a_librarys_messages_are_read_from_its_own_convention(traces: dict[str, pl.DataFrame], driver: str) -> None:
    convention, expected = EXPECTED[driver]
    messages = _messages(traces[driver])
    assert messages, f"{driver}: no messages read"
    assert convention in {message.convention for message in messages}
    assert expected <= _shows(messages), f"{driver}: shows {sorted(_shows(messages))}"
    for message in messages:
        assert message.size_bytes == sum(len(part.text.encode()) for part in message.parts)  # nothing cut here


@pytest.mark.parametrize("driver", NO_CONTENT)
def test_a_library_that_records_no_content_shows_no_messages(traces: dict[str, pl.DataFrame], driver: str) -> None:
    assert _messages(traces[driver]) == []


def test_the_span_detail_shows_a_real_calls_messages(traces: dict[str, pl.DataFrame]) -> None:
    spans = traces["openinference_anthropic"]
    view = build_trace_view(str(spans["trace_id"][0]), spans, load_stage_rules())
    calls = [
        index for index in range(spans.height) if span_messages(attribute_dict(spans["attributes"][index])).messages
    ]
    assert calls
    shown = texts(span_detail(view, calls[0]))
    assert any(text.startswith("Messages (") for text in shown)
    assert any(QUESTIONS[0] in text or QUESTIONS[1] in text for text in shown)
    assert f"calls tool {TOOL_ORDER}" in shown
    silent = next(index for index in range(view.spans.height) if index not in calls)
    assert not any(text.startswith("Messages (") for text in texts(span_detail(view, silent)))


def test_long_texts_and_long_histories_are_cut_and_counted() -> None:
    long = "x" * (MAX_PART_CHARS + 10)
    history = [{"role": "user", "parts": [{"type": "text", "content": long if i == 0 else "hi"}]} for i in range(60)]
    found = span_messages({"gen_ai.input.messages": json.dumps(history)})
    assert len(found.messages) == MAX_MESSAGES and found.omitted == 60 - MAX_MESSAGES
    first = found.messages[0].parts[0]
    assert first.cut_chars == 10 and len(first.text) == MAX_PART_CHARS
    assert found.messages[0].size_bytes == MAX_PART_CHARS + 10


def test_malformed_values_are_shown_as_text_not_raised() -> None:
    found = span_messages(
        {"gen_ai.input.messages": "[{not json", "llm.output_messages.0.message.role": "assistant"},
        [("gen_ai.choice", {"message": "{]"})],
    )
    assert [(m.direction, m.convention, m.parts[0].text) for m in found.messages] == [
        ("input", "GenAI semantic conventions", "[{not json"),
        ("output", "GenAI semantic conventions (events)", "{]"),
    ]
