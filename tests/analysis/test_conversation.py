"""The conversation a request is a turn of: the rule table's keys in order, on any span of the trace, the resource's
as a fallback (analysis.conversation, request_summary's conversation_id)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from analysis_support import S, frame

from analysis.conversation import CONVERSATION_KEYS, conversation_key
from analysis.decomposition import request_summary
from analysis.spans import ATTRIBUTES, attribute
from testkit import import_first_trace, migrated_database


def conversations(spans: list[S]) -> dict[str, str | None]:
    summary = request_summary(frame(spans))
    return dict(zip(summary["trace_id"].to_list(), summary["conversation_id"].to_list(), strict=True))


def test_each_key_of_the_table_names_a_conversation_and_the_first_key_wins() -> None:
    spans = [
        S(f"r{i}", "", 0, 100, trace_id=f"t{i}", attributes={key: f"c-{i}"}) for i, key in enumerate(CONVERSATION_KEYS)
    ]
    both = {"session.id": "openinference", "gen_ai.conversation.id": "semconv"}
    spans.append(S("b", "", 0, 100, trace_id="tb", attributes=both))
    spans.append(S("n", "", 0, 100, trace_id="tn"))
    each = {f"t{i}": f"c-{i}" for i in range(len(CONVERSATION_KEYS))}
    assert conversations(spans) == each | {"tb": "semconv", "tn": None}


def test_a_child_span_names_the_conversation_of_its_trace() -> None:
    # OpenInference's using_session marks the spans its instrumentors open: the model calls, not the app's root.
    spans = [
        S("root", "", 0, 1000),
        S("llm", "root", 100, 400, attributes={"session.id": "s-7"}),
        S("empty", "root", 50, 60, attributes={"gen_ai.conversation.id": ""}),
    ]
    assert conversations(spans) == {"t1": "s-7"}


def test_the_resource_names_it_when_no_span_does() -> None:
    spans = frame([S("a", "", 0, 10, attributes={"session.id": "span"}), S("b", "", 0, 10)]).with_columns(
        pl.Series("resource_attributes", [{}, {"session.id": "resource"}], dtype=ATTRIBUTES)
    )
    assert spans.select(conversation_key(spans))["conversation_id"].to_list() == ["span", "resource"]


def test_a_codex_cli_turn_names_its_thread_as_the_conversation(chdb_dsn: str) -> None:
    """The Codex CLI's real capture: ``conversation.id`` on the turn's ``run_turn`` span (its thread ID)."""
    capture = Path(__file__).parents[1] / "realworld" / "captures" / "codex" / "engine-off-stream.json"
    with migrated_database(chdb_dsn, "codex_conversation") as ch:
        spans = import_first_trace(ch, capture)
    thread = spans.filter(pl.col("name") == "run_turn").select(attribute("conversation.id")).to_series()
    assert thread.len() == 1 and thread[0]
    summary = request_summary(spans)
    assert dict(zip(summary["trace_id"], summary["conversation_id"], strict=True)) == {spans["trace_id"][0]: thread[0]}
