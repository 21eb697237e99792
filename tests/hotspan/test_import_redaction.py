"""``hotspan import`` redacts as the served path does (issue 32): real libraries' captures (tests/realworld/captures:
Logfire and OpenLLMetry write GenAI semconv ``gen_ai.input.messages``, OpenInference ``input.value`` and
``llm.input_messages.*``) with an e-mail address put into the user's question, imported into a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.redaction import Redactor, load_redaction
from hotspan.importer import StoreSink, import_paths
from storage.clickhouse import ClickHouse
from storage.writer import ClickHouseTraceWriter

CAPTURES = Path(__file__).resolve().parents[1] / "realworld" / "captures"
QUESTION = "Where is my order A-1042"
EMAIL = "jane.roe@example.org"

RAW_VALUES = """
SELECT countIf(arrayExists(v -> position(v, {needle:String}) > 0, mapValues(SpanAttributes))
               OR arrayExists(m -> arrayExists(v -> position(v, {needle:String}) > 0, mapValues(m)), Events.Attributes))
FROM otel_traces
"""


def with_email(capture: str, tmp_path: Path) -> tuple[Path, int]:
    """The capture with the e-mail address put into the user's question; the file and how often it went in."""
    text = (CAPTURES / capture).read_text(encoding="utf-8")
    copies = text.count(QUESTION)
    assert copies, f"{capture} no longer holds the question"
    path = tmp_path / capture.replace("/", "__")
    path.write_text(text.replace(QUESTION, f"{QUESTION} (write to {EMAIL})"), encoding="utf-8")
    return path, copies


@pytest.mark.parametrize(
    ("capture", "key"),
    [
        ("logfire/engine-off-nostream.json", "gen_ai.input.messages"),
        ("openllmetry_openai/engine-off-nostream.json", "gen_ai.input.messages"),
        ("openinference_openai/engine-off-nostream.json", "llm.input_messages.1.message.content"),
    ],
)
def test_an_imported_capture_is_stored_masked(store: ClickHouse, tmp_path: Path, capture: str, key: str) -> None:
    path, copies = with_email(capture, tmp_path)
    table = load_redaction("default")
    assert table is not None

    summary = import_paths([path], StoreSink(ClickHouseTraceWriter(store)), progress=False, redactor=Redactor(table))

    assert summary.spans and not summary.rejected
    assert summary.redacted == {"email": copies}
    assert store.query_rows(RAW_VALUES, {"needle": EMAIL})[0][0] == 0
    rows = store.query_rows(f"SELECT SpanAttributes['{key}'] FROM otel_traces")
    values = [value for (value,) in rows if QUESTION in value]
    assert values and all(f"{QUESTION} (write to [REDACTED:email])" in value for value in values)
    if key == "gen_ai.input.messages":
        # Masked inside the JSON string, the value stays the JSON the library wrote.
        assert all(isinstance(json.loads(value), list) for value in values)
    assert "redacted: email" in summary.render()


def test_without_a_redactor_the_capture_is_stored_as_written(store: ClickHouse, tmp_path: Path) -> None:
    path, _ = with_email("logfire/engine-off-nostream.json", tmp_path)

    summary = import_paths([path], StoreSink(ClickHouseTraceWriter(store)), progress=False)

    assert summary.redacted == {}
    assert store.query_rows(RAW_VALUES, {"needle": EMAIL})[0][0] > 0
