"""The anomaly detector on stored history: steady minutes of agent requests, then a minute of queue saturation,
then steady minutes again. Spans go through the collector's decode path and the trace pipeline (service graph,
request summaries) into one embedded ClickHouse database; the detector is evaluated minute by minute with the
clock set to each minute's end.

Checked: no incident on the steady part (including the first minutes, whose baselines are too short), exactly
one incident on the fault minute naming the deviating series with their baselines, the diagnosis finding of the
fault as new against the baseline window, topology neighbours and example traces of the fault minute; evaluating
the same window again (another detector, as after a restart) duplicates nothing; the incident resolves once the
series are back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from diagnosis_support import T0, Chat, Request, SpanSpec, build_all, otlp_request

from collector.ingest import Ingestor
from hotspan.app import Storage, open_trace_pipeline, trace_processors
from processors.pipeline.config import TracePipelineConfig
from query.anomaly import MINUTE_NS, AnomalyDetector, AnomalySettings, IncidentChange
from query.service import QueryService
from storage.clickhouse import ClickHouse
from storage.incident_store import ClickHouseIncidentStore, IncidentQuery
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import migrated_database, query_room

TENANT = "anomaly"
STEADY_MINUTES = 8
FAULT_MINUTE = STEADY_MINUTES
RECOVERY_MINUTES = 2
PER_MINUTE = 24
BASE = (T0 // MINUTE_NS + 1) * MINUTE_NS
"""Start of the first minute (whole minutes, as the rollups are)."""
SETTINGS = AnomalySettings(
    window_minutes=1, baseline_minutes=10, min_baseline_minutes=5, settle_s=0, min_calls=10, min_minute_calls=5
)


def _steady(minute: int, rng: np.random.Generator) -> list[SpanSpec]:
    """Requests spread over the minute, tool and engine times jittered by a few ms."""
    return build_all(
        Request(
            trace=minute * 1000 + i,
            start_ms=(BASE - T0) / 1e6 + minute * 60_000 + i * 2_400,
            tool_ms=float(rng.normal(20.0, 2.0)),
            chats=(
                Chat(
                    prompt=f"q {minute} {i}",
                    decode_ms=float(rng.normal(20.0, 2.0)),
                    prefill_ms=float(rng.normal(8.0, 1.0)),
                ),
            ),
        )
        for i in range(PER_MINUTE)
    )


def _saturated(minute: int) -> list[SpanSpec]:
    """Two bursts of twelve requests 20 ms apart, each waiting 25 ms more in the engine's queue than the one
    before (``diagnosis_cases.queue_saturation``'s shape)."""
    return build_all(
        Request(
            trace=minute * 1000 + burst * 100 + i,
            start_ms=(BASE - T0) / 1e6 + minute * 60_000 + burst * 30_000 + i * 20.0,
            chats=(Chat(prompt=f"queued {minute} {burst} {i}", queue_ms=25.0 * (i + 1)),),
        )
        for burst in range(2)
        for i in range(12)
    )


@dataclass(frozen=True)
class History:
    ch: ClickHouse
    query: QueryService
    fault_traces: set[str]


@pytest.fixture(scope="module")
def history(chdb_dsn: str) -> Iterator[History]:
    rng = np.random.default_rng(11)
    minutes = [_steady(m, rng) for m in range(STEADY_MINUTES)]
    minutes.append(_saturated(FAULT_MINUTE))
    minutes += [_steady(FAULT_MINUTE + 1 + m, rng) for m in range(RECOVERY_MINUTES)]
    with migrated_database(chdb_dsn, "anomaly") as ch:
        ingestor = Ingestor(ClickHouseTraceWriter(ch))
        for spans in minutes:
            ingestor.export(otlp_request(spans), tenant=TENANT)
        storage = Storage(ch, ClickHouseTraceReader(ch), ClickHouseTraceWriter(ch))
        open_trace_pipeline(storage, TracePipelineConfig(), trace_processors(storage)).run_once(force=True)
        yield History(ch, query_room(ch), {span.trace_id for span in minutes[FAULT_MINUTE]})


def _detector(history: History) -> AnomalyDetector:
    store = ClickHouseIncidentStore(history.ch)
    return AnomalyDetector(store, history.query.store, history.query.store, history.query.diagnosis, SETTINGS)


def _at_end_of(minute: int) -> int:
    return BASE + (minute + 1) * MINUTE_NS


@pytest.fixture(scope="module")
def changes(history: History) -> list[list[IncidentChange]]:
    """What one detector wrote after each minute, in order."""
    detector = _detector(history)
    return [detector.evaluate(_at_end_of(m)) for m in range(FAULT_MINUTE + 1 + RECOVERY_MINUTES)]


def test_steady_minutes_open_no_incident(changes: list[list[IncidentChange]]) -> None:
    assert [c for minute in changes[:FAULT_MINUTE] for c in minute] == []


def test_the_fault_minute_opens_exactly_one_incident_naming_series_cause_neighbours_and_examples(
    changes: list[list[IncidentChange]], history: History
) -> None:
    assert [c.change for c in changes[FAULT_MINUTE]] == ["opened"]
    incident = changes[FAULT_MINUTE][0].incident
    assert incident.status == "open" and incident.tenant == TENANT
    assert (incident.window_start_ns, incident.window_end_ns) == (
        _at_end_of(FAULT_MINUTE - 1),
        _at_end_of(FAULT_MINUTE),
    )
    assert incident.baseline_end_ns == incident.window_start_ns and not incident.seasonal
    # The engine's queue grew: its latency is among the deviating series, well above its baseline.
    engine = [s for s in incident.series if s["service"] == "vllm" and s["name"] == "llm_request"]
    assert [s["metric"] for s in engine] == ["p95_ms"], incident.series
    assert engine[0]["observed"] > 3 * engine[0]["baseline"] and engine[0]["score"] > SETTINGS.z_limit
    assert incident.score == max(s["score"] for s in incident.series)
    assert incident.observed_value > incident.baseline_value
    assert {"gateway", "agent", "vllm"} <= set(incident.services)
    new = {f["cause"] for f in incident.findings if f["new"]}
    assert "queue_saturation" in new, incident.findings
    assert incident.neighbours, incident
    assert incident.example_trace_ids and set(incident.example_trace_ids) <= history.fault_traces


def test_evaluating_the_same_windows_again_duplicates_nothing(
    changes: list[list[IncidentChange]], history: History
) -> None:
    again = _detector(history)
    assert again.evaluate(_at_end_of(FAULT_MINUTE)) == []
    stored = ClickHouseIncidentStore(history.ch).incidents(IncidentQuery(), tenant=TENANT)
    assert len(stored) == 1


def test_the_incident_resolves_when_the_series_are_back(changes: list[list[IncidentChange]], history: History) -> None:
    after = [c for minute in changes[FAULT_MINUTE + 1 :] for c in minute]
    assert [c.change for c in after] == ["resolved"]
    resolved = after[0].incident
    assert resolved.incident_id == changes[FAULT_MINUTE][0].incident.incident_id
    assert resolved.resolved_at_ns == _at_end_of(FAULT_MINUTE + 1)
    stored = ClickHouseIncidentStore(history.ch).incidents(IncidentQuery(), tenant=TENANT)
    assert [(i.incident_id, i.status) for i in stored] == [(resolved.incident_id, "resolved")]
    assert ClickHouseIncidentStore(history.ch).incidents(IncidentQuery(), tenant="someone-else") == []
