"""Conversations over a served Hotspan: three-turn conversations of real instrumentation libraries (OpenInference's
``using_session`` -> ``session.id``, Langfuse's ``propagate_attributes`` -> ``langfuse.session.id``) and pydantic-ai's
``gen_ai.conversation.id`` are listed by ``/api/v1/conversations`` and shown turn by turn by
``/api/v1/conversations/{id}``: stages, tokens (against the driver's wire truth), cost, context growth, the slowest
turn.

Input: the drivers run live against the vLLM emulator, spans exported over OTLP/HTTP to the server (the ingest path
production runs), each user request a turn sent after the earlier ones (``AppSettings(conversation=True)``); and the
stored pydantic-ai capture, posted to ``/v1/traces``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_kit import served_on
from pricing_kit import euro_prices, euros
from prometheus_support import wait_until

from analysis import STAGES
from collector.redaction import Redactor, packaged_table
from hotspan.server import RunningServer
from instrumented_stack.realclients.common import AppSettings
from instrumented_stack.realclients.harness import DriverResult, run_driver

CAPTURE = Path(__file__).parents[1] / "realworld" / "captures" / "pydantic_ai" / "engine-off-nostream.json"
DRIVERS = ("openinference_openai", "langfuse")
TURNS = 3


@pytest.fixture(scope="module")
def served(
    chdb_dsn: str, layout: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, dict[str, DriverResult]]]:
    directory = tmp_path_factory.mktemp("conversations_api")
    with served_on(chdb_dsn, layout, directory, "c", prices_path=euro_prices(directory)) as running:
        answer = httpx.post(
            f"{running.base_url}/v1/traces",
            content=CAPTURE.read_text(),
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        runs = {
            driver: run_driver(
                driver,
                running.base_url,
                directory / f"{driver}.truth.json",
                engine_spans=False,
                requests=TURNS,
                app=AppSettings(conversation=True),
            )
            for driver in DRIVERS
        }
        # A driver's exporter sends batches as spans end, so a turn's spans can arrive apart and the pipeline may
        # have analysed part of one; once every span is stored, one forced pass analyses each turn whole.
        assert running.pipeline.flush()
        assert running.trace_pipeline is not None
        running.trace_pipeline.run_once(force=True)
        yield running, runs


def conversations(server: RunningServer, **params: Any) -> list[dict[str, Any]]:
    answer = httpx.get(f"{server.base_url}/api/v1/conversations", params=params, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["conversations"]


def analysed(server: RunningServer) -> dict[str, dict[str, Any]]:
    """Every conversation by ID, once each driver's conversation has all its turns analysed."""

    def whole() -> dict[str, dict[str, Any]] | None:
        rows = {row["conversation_id"]: row for row in conversations(server, start_ns=0)}
        ready = all(rows.get(f"realclient-{d}-conversation", {}).get("turns") == TURNS for d in DRIVERS)
        return rows if ready else None

    return wait_until(whole, 60, "every turn of the drivers' conversations to be analysed")


def wire_tokens(request: dict[str, Any]) -> tuple[int, int, int]:
    """Input, output and cached tokens the model server returned for one request (the driver's truth)."""
    attempts = request["llm_attempts"]
    return (
        sum(a["prompt_tokens"] for a in attempts),
        sum(a["completion_tokens"] for a in attempts),
        sum(a["cached_tokens"] for a in attempts),
    )


@pytest.mark.both_layouts
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_three_turn_conversation_is_listed_and_shown_turn_by_turn(
    served: tuple[RunningServer, dict[str, DriverResult]], driver: str
) -> None:
    server, runs = served
    conversation_id = f"realclient-{driver}-conversation"
    row = analysed(server)[conversation_id]
    truth = runs[driver].truth["requests"]
    assert [r["trace_id"] for r in truth] == runs[driver].trace_ids

    answer = httpx.get(f"{server.base_url}/api/v1/conversations/{conversation_id}", timeout=30)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    turns = body["turns"]
    # The turns in time order are the driver's requests in the order it made them.
    assert [t["trace_id"] for t in turns] == [r["trace_id"] for r in truth]
    for turn, request in zip(turns, truth, strict=True):
        assert set(turn["stages_ns"]) == set(STAGES)
        assert sum(turn["stages_ns"].values()) == turn["duration_ns"]
        assert turn["stages_ns"]["llm.call"] > 0 and turn["stages_ns"]["tool"] > 0
        # The root span wraps the measured work: its duration is the truth's e2e within 20 ms.
        assert abs(turn["duration_ns"] - request["e2e_ns"]) < 20_000_000
        tokens_in, tokens_out, cached = wire_tokens(request)
        assert (turn["input_tokens"], turn["output_tokens"], turn["cached_input_tokens"]) == (
            tokens_in,
            tokens_out,
            cached,
        )
        assert turn["llm_calls"] == request["llm_calls"]
        assert turn["cost"] == pytest.approx(euros(tokens_in, cached, tokens_out))
    # Each turn is sent after the earlier ones, so the context grows turn by turn.
    growth = [t["context_growth_tokens"] for t in turns]
    assert growth[0] is None and all(g > 0 for g in growth[1:])
    assert [t["input_tokens"] for t in turns[1:]] == [
        a["input_tokens"] + g for a, g in zip(turns[:-1], growth[1:], strict=True)
    ]
    slowest = max(turns, key=lambda t: t["duration_ns"])
    assert body["slowest_trace_id"] == slowest["trace_id"]
    assert body["currency"] == "EUR" and not body["truncated"]
    totals = body["conversation"]
    assert totals["cost"] == pytest.approx(sum(t["cost"] for t in turns))
    assert totals["duration_ns"] == sum(t["duration_ns"] for t in turns)

    # The list's row carries the same totals (its cost summed in another order).
    assert row | {"cost": None} == totals | {"cost": None} and row["cost"] == pytest.approx(totals["cost"])
    assert row["turns"] == TURNS and row["service"] == f"realclient-{driver}"
    assert row["first_start_ns"] == turns[0]["start_ns"] and row["last_start_ns"] == turns[-1]["start_ns"]


def test_semconv_conversation_ids_of_pydantic_ai_are_listed(
    served: tuple[RunningServer, dict[str, DriverResult]],
) -> None:
    server, _ = served
    rows = analysed(server)
    # pydantic-ai names a conversation per agent run (gen_ai.conversation.id): two requests, two one-turn ones.
    pydantic = [row for row in rows.values() if row["service"].startswith("realclient-pydantic_ai")]
    assert len(pydantic) == 2 and all(row["turns"] == 1 for row in pydantic)


@pytest.mark.both_layouts
def test_search_filters_and_sort(served: tuple[RunningServer, dict[str, DriverResult]]) -> None:
    server, _ = served
    rows = analysed(server)
    assert [r["conversation_id"] for r in conversations(server, start_ns=0, q="LANGFUSE")] == [
        "realclient-langfuse-conversation"
    ]
    by_service = conversations(server, start_ns=0, service="realclient-openinference_openai")
    assert [r["conversation_id"] for r in by_service] == ["realclient-openinference_openai-conversation"]
    longest = max(rows.values(), key=lambda r: r["duration_ns"])
    by_duration = conversations(server, start_ns=0, sort="duration")
    assert by_duration[0]["conversation_id"] == longest["conversation_id"]
    assert [r["duration_ns"] for r in by_duration] == sorted((r["duration_ns"] for r in by_duration), reverse=True)
    at_least = conversations(server, start_ns=0, min_duration_ns=longest["duration_ns"])
    assert [r["conversation_id"] for r in at_least] == [longest["conversation_id"]]
    at_most = conversations(server, start_ns=0, max_duration_ns=longest["duration_ns"] - 1)
    assert longest["conversation_id"] not in {r["conversation_id"] for r in at_most} and at_most
    assert conversations(server, start_ns=0, sort="turns")[0]["turns"] == TURNS
    # Costs come from the price table at read time: the service filters and sorts by them.
    # Two drivers may cost the same (same prompts, the same prefix-cache hits): the filters are checked against the
    # rows' own costs, and a bound above every cost must keep all of them on one side and none on the other.
    priced = [r for r in rows.values() if r["cost"] is not None]
    costliest = max(r["cost"] for r in priced)
    by_cost = conversations(server, start_ns=0, sort="cost")
    assert by_cost[0]["cost"] == pytest.approx(costliest, rel=1e-9)
    assert [r["cost"] for r in by_cost] == sorted((r["cost"] for r in by_cost), reverse=True)
    near = costliest * (1 - 1e-9)  # the list sums a conversation's turns in no fixed order
    ids = {r["conversation_id"] for r in priced}
    at_least_near = {r["conversation_id"] for r in conversations(server, start_ns=0, min_cost=near)}
    assert at_least_near == {r["conversation_id"] for r in priced if r["cost"] >= near} and at_least_near
    below_near = {r["conversation_id"] for r in conversations(server, start_ns=0, max_cost=near)}
    assert below_near == {r["conversation_id"] for r in priced if r["cost"] < near}
    above = costliest * 2
    assert conversations(server, start_ns=0, min_cost=above) == []
    assert {r["conversation_id"] for r in conversations(server, start_ns=0, max_cost=above)} >= ids
    assert conversations(server, start_ns=0, end_ns=1) == []
    assert len(conversations(server, start_ns=0, limit=1)) == 1


def test_unknown_conversation_and_bad_parameters(served: tuple[RunningServer, dict[str, DriverResult]]) -> None:
    server, _ = served
    base = f"{server.base_url}/api/v1/conversations"
    assert httpx.get(f"{base}/no-such-conversation", timeout=30).status_code == 404
    assert httpx.get(base, params={"start_ns": 2, "end_ns": 1}, timeout=30).status_code == 400
    assert httpx.get(base, params={"min_duration_ns": 2, "max_duration_ns": 1}, timeout=30).status_code == 400
    assert httpx.get(base, params={"min_cost": 2, "max_cost": 1}, timeout=30).status_code == 400
    assert httpx.get(base, params={"sort": "price"}, timeout=30).status_code == 400


def _payload_keys(server: RunningServer, trace_id: str) -> list[str]:
    """The payload attribute keys (the packaged redaction table's) on the trace's stored spans."""
    answer = httpx.get(f"{server.base_url}/api/v1/traces/{trace_id}", timeout=30)
    assert answer.status_code == 200, answer.text
    named = re.compile(Redactor(packaged_table()).key_regex)
    return [key for span in answer.json()["spans"] for key in span["attributes"] if named.fullmatch(key)]


def test_deleting_a_conversations_payloads_reaches_every_turn(
    served: tuple[RunningServer, dict[str, DriverResult]],
) -> None:
    """``DELETE /api/v1/payloads/conversations/{id}`` (issue 32): the OpenInference conversation's messages go
    from all three turns; pydantic-ai's conversations keep theirs. Runs last: it changes the stored spans."""
    server, _ = served
    rows = analysed(server)
    conversation = "realclient-openinference_openai-conversation"
    turns = [
        turn["trace_id"] for turn in httpx.get(f"{server.base_url}/api/v1/conversations/{conversation}").json()["turns"]
    ]
    assert len(turns) == TURNS and all(_payload_keys(server, trace) for trace in turns)
    other = next(row for row in rows.values() if row["service"].startswith("realclient-pydantic_ai"))
    other_turns = httpx.get(f"{server.base_url}/api/v1/conversations/{other['conversation_id']}").json()["turns"]
    kept = {turn["trace_id"]: _payload_keys(server, turn["trace_id"]) for turn in other_turns}
    assert all(kept.values())

    answer = httpx.delete(f"{server.base_url}/api/v1/payloads/conversations/{conversation}", timeout=60)

    assert answer.status_code == 200, answer.text
    assert answer.json()["trace_ids"] == turns and answer.json()["spans"] >= TURNS
    assert all(not _payload_keys(server, trace) for trace in turns)
    assert {trace: _payload_keys(server, trace) for trace in kept} == kept
    missing = httpx.delete(f"{server.base_url}/api/v1/payloads/conversations/no-such-conversation", timeout=30)
    assert missing.status_code == 404
