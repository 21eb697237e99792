"""The anomaly detector on stored history: steady minutes of agent requests, then a minute of queue saturation,
then steady minutes again. Spans go through the collector's decode path and the trace pipeline (service graph,
request summaries) into one embedded ClickHouse database; the detector is evaluated minute by minute with the
clock set to each minute's end.

Checked: no incident on the steady part (including the first minutes, whose baselines are too short) nor on a minute
where two of the 24 requests stalled (its p95 is theirs, but two slow calls are not a deviation), exactly
one incident on the fault minute naming the deviating series with their baselines, the diagnosis finding of the
fault as new against the baseline window, topology neighbours and example traces of the fault minute; evaluating
the same window again (another detector, as after a restart) duplicates nothing; the incident resolves once the
series are back. A minute of uncompressed megabyte tool responses moves no latency series, and opens one incident
on the diagnosis finding new against the baseline window alone, resolved once the finding is gone. A second
fault in the minute after the first one's adds its cause to the open incident's findings, as new, and the open
incident's baseline window is diagnosed once however many minutes it stays open. The detector's one read of every
tenant's minutes holds what a read of each tenant's does.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl
import pytest
from anomaly_history import FAULT_MINUTE, MINUTES, SETTINGS, at_end_of, saturated
from anomaly_history import history as history_minutes
from dash import html
from diagnosis_support import otlp_request
from plotly.utils import PlotlyJSONEncoder

from collector.ingest import Ingestor
from dashboards.incident_panels import incident_detail
from diagnosis import DiagnosisReport
from hotspan.app import Storage, open_trace_pipeline, trace_processors
from incidents.lifecycle import AnomalyDetector, IncidentChange
from processors.pipeline.config import TracePipelineConfig
from query.anomaly import DAY_NS, MINUTE_NS
from query.diagnosis import DiagnosisService
from query.incident_text import incident_summary, series_text
from query.service import QueryService
from storage.clickhouse import ClickHouse
from storage.incident_store import ClickHouseIncidentStore, IncidentQuery, SeriesKind
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import migrated_database, query_room

TENANT = "anomaly"
SEASONAL = "seasonal"
"""A tenant with the same history, then nothing until the fault minute's time one day later, which repeats the
fault: no trailing baseline, a seasonal one."""
NEXT_DAY_FAULT = FAULT_MINUTE + 24 * 60
STALLED = "stalled"
"""A tenant with the same steady minutes whose fault minute is steady too, but for two requests a stall slowed
:data:`anomaly_history.STALL` times: its p95 leaves the baseline, its count of slow calls does not."""

PAYLOAD = "payload"
"""A tenant with the same steady minutes whose fault minute's tool calls answer uncompressed megabyte bodies, timed
as a steady minute (:func:`anomaly_history.uncompressed`)."""
SECOND = "second"
"""A tenant with the same history whose minute after the fault is saturated again and answers megabyte tool
bodies: a second fault while the first one's incident is open."""


@dataclass(frozen=True)
class History:
    ch: ClickHouse
    query: QueryService
    fault_traces: set[str]


@pytest.fixture(scope="module")
def history(chdb_dsn: str) -> Iterator[History]:
    minutes = history_minutes()
    with migrated_database(chdb_dsn, "anomaly") as ch:
        ingestor = Ingestor(ClickHouseTraceWriter(ch))
        # One request a minute, each tenant's minutes stored in one batch (one insert), as a spool group is.
        for tenant, spans_by_minute in (
            (TENANT, minutes),
            (SEASONAL, [*minutes, saturated(NEXT_DAY_FAULT)]),
            (STALLED, history_minutes(stall=True)),
            (PAYLOAD, history_minutes(payload=True)),
            (SECOND, history_minutes(second_fault=True)),
        ):
            ingestor.export_all([(otlp_request(spans), []) for spans in spans_by_minute], tenant=tenant)
        storage = Storage(ch, ClickHouseTraceReader(ch), ClickHouseTraceWriter(ch))
        open_trace_pipeline(storage, TracePipelineConfig(), trace_processors(storage)).run_once(force=True)
        yield History(ch, query_room(ch), {span.trace_id for span in minutes[FAULT_MINUTE]})


class CountingDiagnosis(DiagnosisService):
    """The query room's diagnosis, counting how often each (tenant, start_ns, end_ns) window was diagnosed."""

    def __init__(self, room: DiagnosisService) -> None:
        super().__init__(room.reader, room.settings, room.stage_rules)
        self.windows: Counter[tuple[str | None, int | None, int | None]] = Counter()

    def diagnose(self, **window: Any) -> DiagnosisReport:
        self.windows[(window["tenant"], window.get("start_ns"), window.get("end_ns"))] += 1
        return super().diagnose(**window)


def _detector(history: History, diagnosis: DiagnosisService | None = None) -> AnomalyDetector:
    store = ClickHouseIncidentStore(history.ch)
    room = history.query
    return AnomalyDetector(store, room.store, room.store, diagnosis or room.diagnosis, SETTINGS)


@pytest.fixture(scope="module")
def counted(history: History) -> CountingDiagnosis:
    return CountingDiagnosis(history.query.diagnosis)


@pytest.fixture(scope="module")
def judged(history: History, counted: CountingDiagnosis) -> list[list[IncidentChange]]:
    """What one detector wrote after each minute, in order."""
    detector = _detector(history, counted)
    return [detector.evaluate(at_end_of(m)) for m in range(MINUTES)]


@pytest.fixture(scope="module")
def changes(judged: list[list[IncidentChange]]) -> list[list[IncidentChange]]:
    """What the detector wrote for :data:`TENANT` after each minute, in order."""
    return [[c for c in minute if c.incident.tenant == TENANT] for minute in judged]


def test_steady_minutes_open_no_incident(changes: list[list[IncidentChange]]) -> None:
    assert [c for minute in changes[:FAULT_MINUTE] for c in minute] == []


def test_the_fault_minute_opens_exactly_one_incident_naming_series_cause_neighbours_and_examples(
    changes: list[list[IncidentChange]], history: History
) -> None:
    assert [c.change for c in changes[FAULT_MINUTE]] == ["opened"]
    incident = changes[FAULT_MINUTE][0].incident
    assert incident.status == "open" and incident.tenant == TENANT
    assert (incident.window_start_ns, incident.window_end_ns) == (
        at_end_of(FAULT_MINUTE - 1),
        at_end_of(FAULT_MINUTE),
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
    assert again.evaluate(at_end_of(FAULT_MINUTE)) == []
    stored = ClickHouseIncidentStore(history.ch).incidents(IncidentQuery(), tenant=TENANT)
    assert len(stored) == 1


def test_the_incident_resolves_when_the_series_are_back(changes: list[list[IncidentChange]], history: History) -> None:
    after = [c for minute in changes[FAULT_MINUTE + 1 :] for c in minute]
    assert [c.change for c in after] == ["resolved"]
    resolved = after[0].incident
    assert resolved.incident_id == changes[FAULT_MINUTE][0].incident.incident_id
    assert resolved.resolved_at_ns == at_end_of(FAULT_MINUTE + 1)
    stored = ClickHouseIncidentStore(history.ch).incidents(IncidentQuery(), tenant=TENANT)
    assert [(i.incident_id, i.status) for i in stored] == [(resolved.incident_id, "resolved")]
    assert ClickHouseIncidentStore(history.ch).incidents(IncidentQuery(), tenant="someone-else") == []


def test_a_day_of_history_gives_a_seasonal_baseline(changes: list[list[IncidentChange]], history: History) -> None:
    opened = _detector(history).evaluate(at_end_of(NEXT_DAY_FAULT))
    assert [(c.change, c.incident.tenant) for c in opened] == [("opened", SEASONAL)]
    incident = opened[0].incident
    half = SETTINGS.baseline_minutes * MINUTE_NS // 2
    # The baseline is the same time of day one day earlier (its minutes hold the first day's fault minute too: the
    # median and MAD pass over it), not the empty trailing minutes.
    assert incident.seasonal and all(series["seasonal"] for series in incident.series)
    assert incident.baseline_start_ns == incident.window_start_ns - DAY_NS - half
    assert incident.baseline_end_ns == incident.window_end_ns - DAY_NS + half
    assert any(f["cause"] == "queue_saturation" for f in incident.findings)


def test_two_stalled_requests_move_the_p95_but_open_no_incident(
    changes: list[list[IncidentChange]], history: History
) -> None:
    store = ClickHouseIncidentStore(history.ch)
    minute = store.series("operation", at_end_of(FAULT_MINUTE - 1), at_end_of(FAULT_MINUTE), tenant=STALLED)
    before = store.series("operation", at_end_of(FAULT_MINUTE - 2), at_end_of(FAULT_MINUTE - 1), tenant=STALLED)
    engine = pl.col("name") == "llm_request"
    # The p95 of 24 calls is the second slowest: the stalled pair's, several times the minute before's.
    assert minute.filter(engine)["p95_ns"][0] > 5 * before.filter(engine)["p95_ns"][0]
    assert store.incidents(IncidentQuery(), tenant=STALLED) == []


def test_a_fault_no_latency_shows_opens_an_incident_on_its_new_finding(judged: list[list[IncidentChange]]) -> None:
    mine = [[c for c in minute if c.incident.tenant == PAYLOAD] for minute in judged]
    assert [c for minute in mine[:FAULT_MINUTE] for c in minute] == []
    assert [c.change for c in mine[FAULT_MINUTE]] == ["opened"]
    incident = mine[FAULT_MINUTE][0].incident
    # Timing is a steady minute's: the finding is the only deviating series.
    assert [(s["kind"], s["service"], s["name"], s["metric"]) for s in incident.series] == [
        ("finding", "gateway", "oversized_payload", "severity")
    ], incident.series
    assert (incident.kind, incident.name, incident.metric) == ("finding", "oversized_payload", "severity")
    assert incident.baseline_value == 0 and incident.observed_value >= 2
    assert incident_summary(incident).startswith("gateway finding oversized_payload: ")
    assert series_text(incident.series[0]) == "gateway finding oversized_payload critical (baseline none)"
    shown = json.dumps(incident_detail(incident, lambda _: html.Span()).to_plotly_json(), cls=PlotlyJSONEncoder)
    assert '"critical"' in shown and '"none"' in shown and "oversized_payload" in shown
    new = [f["cause"] for f in incident.findings if f["new"]]
    assert new and new[0] == "oversized_payload", incident.findings
    assert incident.example_trace_ids
    after = [c for minute in mine[FAULT_MINUTE + 1 :] for c in minute]
    assert [(c.change, c.incident.incident_id) for c in after] == [("resolved", incident.incident_id)]
    assert after[0].incident.resolved_at_ns == at_end_of(FAULT_MINUTE + 1)


def test_a_later_window_adds_its_new_causes_to_the_open_incident(judged: list[list[IncidentChange]]) -> None:
    mine = [[c for c in minute if c.incident.tenant == SECOND] for minute in judged]
    assert [c.change for c in mine[FAULT_MINUTE]] == ["opened"]
    opened = mine[FAULT_MINUTE][0].incident
    assert "oversized_payload" not in {f["cause"] for f in opened.findings}, opened.findings
    assert [c.change for c in mine[FAULT_MINUTE + 1]] == ["updated"]
    updated = mine[FAULT_MINUTE + 1][0].incident
    assert updated.incident_id == opened.incident_id
    new = [f["cause"] for f in updated.findings if f["new"]]
    # What the opening window named stays, ahead of what the later one adds.
    assert new[: len(opened_new := [f["cause"] for f in opened.findings if f["new"]])] == opened_new
    assert "queue_saturation" in opened_new and "oversized_payload" in new, updated.findings
    assert len({f["cause"] for f in updated.findings}) == len(updated.findings)


def test_an_open_incident_diagnoses_its_baseline_window_once(
    judged: list[list[IncidentChange]], counted: CountingDiagnosis
) -> None:
    mine = [c.incident for minute in judged for c in minute if c.incident.tenant == SECOND]
    assert [i.status for i in mine] == ["open", "open", "resolved"], mine
    baseline = (SECOND, mine[0].baseline_start_ns, mine[0].baseline_end_ns - 1)
    # The opening minute judged its finding and named its causes against that window, the next minute completed
    # the findings against it: one diagnosis serves all three.
    assert counted.windows[baseline] == 1, counted.windows


@pytest.mark.parametrize("kind", ["operation", "stage"])
def test_one_read_of_every_tenant_holds_what_each_tenants_reads_hold(history: History, kind: SeriesKind) -> None:
    """The detector reads every tenant's minutes in one query, a trailing and a seasonal span at once
    (:mod:`query.anomaly_minutes`): the same rows as a read of each tenant and span."""
    store = ClickHouseIncidentStore(history.ch)
    trailing = (at_end_of(-1), at_end_of(FAULT_MINUTE))
    seasonal = (at_end_of(NEXT_DAY_FAULT - 1), at_end_of(NEXT_DAY_FAULT))
    every = store.series(kind, *trailing, tenant=None, also=seasonal)
    tenants = {TENANT, SEASONAL, STALLED, PAYLOAD, SECOND}
    assert set(every["tenant"]) == tenants
    order = ["tenant", "service", "name", "span_kind", "bucket_ns"]
    for tenant in tenants:
        each = pl.concat([store.series(kind, *span, tenant=tenant) for span in (trailing, seasonal)])
        assert each.height > 0
        assert every.filter(pl.col("tenant") == tenant).sort(order).equals(each.sort(order)), tenant
    assert every.filter(pl.col("bucket_ns") >= seasonal[0])["tenant"].unique().to_list() == [SEASONAL]
    # A tenant without rows in a window gets empty frames of the same columns from the scorer.
    scorer = _detector(history).scorer
    window = scorer.window(at_end_of(FAULT_MINUTE))
    absent = scorer.series(window, ["absent"])["absent"]
    present = scorer.series(window, [TENANT])[TENANT]
    assert absent.observed.height == absent.trailing.height == absent.seasonal.height == 0
    assert (absent.observed.schema, absent.trailing.schema) == (present.observed.schema, present.trailing.schema)
