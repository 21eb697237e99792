"""The demo's schedule opens its incident at the detector's defaults (issue 31: an incident within a new user's first
few minutes, with no setting loosened for the demo): the first run (:mod:`hotspan.demo`'s users, the demo's stack
configuration) is the baseline, the next whole minute runs the fault; judged at that minute's end, the detector opens
one incident naming the fault among its new findings, and judging the first run's minute opens none.

Both runs are the demo's own, spans kept in memory and laid on whole minutes of the past as the demo sends them (the
first run mid-minute, the fault's a second into the next); the detector runs with its clock at each minute's end plus
its settle time, so this checks what it finds, not how soon (the demo's timing: ``hotspan.demo``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.ingest import Ingestor
from hotspan.app import Storage, open_trace_pipeline, trace_processors
from hotspan.demo import FAULT, MINUTE_REQUESTS, USERS, demo_config
from incidents.lifecycle import AnomalyDetector, IncidentChange
from instrumented_stack.capture import InMemorySpans
from instrumented_stack.faults import apply_faults
from instrumented_stack.runner import running_stack
from instrumented_stack.stack import StackConfig
from processors.pipeline.config import TracePipelineConfig
from query.anomaly import MINUTE_NS, AnomalySettings
from storage.incident_store import ClickHouseIncidentStore
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import migrated_database, query_room
from units import NS_PER_S

FIRST_REQUESTS = 40
"""The first run's requests (``hotspan demo``'s default ``--requests``)."""
BASE = 1_781_000_000_000_000_000 // MINUTE_NS * MINUTE_NS
"""Start of the first run's minute (2026-06-09), far from other tests' times."""
FIRST_START_NS = BASE + 20 * NS_PER_S
"""The first run starts mid-minute, as the demo's does once the server is up."""
FAULT_START_NS = BASE + MINUTE_NS + NS_PER_S
"""The fault's minute starts a second past the next whole minute (``hotspan.demo._next_minute``)."""
SETTINGS = AnomalySettings()
"""The detector's defaults, which ``hotspan demo`` serves with."""


def _run(config: StackConfig, requests: int, offset: int, start_ns: int) -> ExportTraceServiceRequest:
    """The spans of ``requests`` workload rows from ``offset`` replayed by :data:`USERS` users on a stack of
    ``config``, as OTLP, moved so the run's first request starts at ``start_ns``."""
    spans = InMemorySpans()
    with running_stack(None, config=config, span_processors=spans) as stack:
        summary = stack.replay(requests, offset=offset, concurrency=USERS)
    assert summary.errors == 0, summary
    run = encode_spans(spans.spans())
    every = [span for rs in run.resource_spans for ss in rs.scope_spans for span in ss.spans]
    shift = start_ns - min(span.start_time_unix_nano for span in every if not span.parent_span_id)
    for span in every:
        span.start_time_unix_nano += shift
        span.end_time_unix_nano += shift
        for event in span.events:
            event.time_unix_nano += shift
    return run


@pytest.fixture(scope="module")
def judged(chdb_dsn: str) -> Iterator[tuple[list[IncidentChange], list[IncidentChange]]]:
    """What the detector wrote judging the first run's minute, then the fault's."""
    config = demo_config()
    first = _run(config, FIRST_REQUESTS, 0, FIRST_START_NS)
    faulty = _run(apply_faults(config, [FAULT]), MINUTE_REQUESTS, FIRST_REQUESTS, FAULT_START_NS)
    with migrated_database(chdb_dsn, "demo_incident") as ch:
        ingestor = Ingestor(ClickHouseTraceWriter(ch))
        ingestor.export(first)
        ingestor.export(faulty)
        storage = Storage(ch, ClickHouseTraceReader(ch), ClickHouseTraceWriter(ch))
        open_trace_pipeline(storage, TracePipelineConfig(), trace_processors(storage)).run_once(force=True)
        room = query_room(ch)
        detector = AnomalyDetector(ClickHouseIncidentStore(ch), room.store, room.store, room.diagnosis, SETTINGS)
        settle_ns = int(SETTINGS.settle_s * NS_PER_S)
        yield (
            detector.evaluate(BASE + MINUTE_NS + settle_ns),
            detector.evaluate(BASE + 2 * MINUTE_NS + settle_ns),
        )


def test_the_first_runs_minute_opens_no_incident(judged: tuple[list[IncidentChange], list[IncidentChange]]) -> None:
    first, _ = judged
    assert first == [], [(c.incident.series, c.incident.findings) for c in first]


def test_the_fault_minute_opens_one_incident_naming_the_fault(
    judged: tuple[list[IncidentChange], list[IncidentChange]],
) -> None:
    _, fault = judged
    assert [c.change for c in fault] == ["opened"], [c.incident.series for c in fault]
    incident = fault[0].incident
    new = [f["cause"] for f in incident.findings if f["new"]]
    assert FAULT in new, (new, incident.findings, incident.series)
    assert incident.example_trace_ids and set(incident.services) >= {"gateway"}
