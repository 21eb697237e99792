"""Diagnosis from client-side spans alone, proven by injection: real instrumentation libraries from PyPI drive
the vLLM emulator with its own spans off, so the only spans are the ones the client libraries write. Each
client fault switch (``instrumented_stack.realclients.faults``) makes its cause the top client-side finding;
clean runs raise none of them.

Runs: ``openinference_openai`` (the OpenAI SDK under OpenInference; token counts, cached tokens, a first-token
event when streaming, tool arguments) streaming, two user requests each, spans through a real OTLP exporter into
an in-process OTLP receiver, then the collector's decode path into one embedded ClickHouse database (each run
under its own tenant) and ``diagnose_window`` as the API calls it. Emulator faults run under two more libraries
(pydantic-ai's own GenAI instrumentation, LangGraph under OpenLLMetry) to show they do not depend on one
convention. Clean runs: the app as the captures record it, and the clean counterparts of the app faults (the
side questions asked at once; the long system prompt without the clock). A run takes 2 to 7 s (the driver
process starts the libraries each time); each happens once per module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from diagnosis import CLIENT_SIDE_CAUSES, DiagnosisReport, Finding, diagnose_window
from instrumented_stack.realclients.common import AppSettings
from instrumented_stack.realclients.faults import CLIENT_FAULTS
from instrumented_stack.realclients.harness import run_driver
from instrumented_stack.realclients.otlp_sink import OtlpSink, create_sink_app
from instrumented_stack.serving import ThreadedServer, bind_loopback
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import migrated_database

EXPECTED_CAUSE = {fault: fault for fault in CLIENT_FAULTS}
"""Client fault switch -> the cause diagnosis must rank first among :data:`CLIENT_SIDE_CAUSES` (each switch is named
after its cause)."""
INFO_ONLY = frozenset({"llm_bound"})
"""Causes that are ``info`` by design: llm_bound says where the time is, not why, and the specific causes outrank
it."""
DRIVER = "openinference_openai"


@dataclass(frozen=True)
class Run:
    """One driver run: the driver, the app's settings, client fault switches and user requests."""

    driver: str = DRIVER
    app: AppSettings = field(default_factory=AppSettings)
    faults: tuple[str, ...] = ()
    requests: int = 2


CLEAN_RUNS = {
    "plain": Run(),
    "side_questions_at_once": Run(app=AppSettings(side_questions=3, side_questions_concurrent=True)),
    "long_stable_system_prompt": Run(app=AppSettings(system_prompt_repeats=3)),
}
FAULT_REQUESTS = {"slow_first_token": 1}
"""Each of its calls waits over a second for the first token: one request (three calls) is enough."""
FAULT_RUNS = [
    *((fault, Run(faults=(fault,), requests=FAULT_REQUESTS.get(fault, 2))) for fault in CLIENT_FAULTS),
    ("slow_first_token", Run(driver="pydantic_ai", faults=("slow_first_token",), requests=1)),
    ("provider_throttling", Run(driver="langgraph", faults=("provider_throttling",))),
]


@pytest.fixture(scope="module")
def client_store(chdb_dsn: str) -> Iterator[ClickHouse]:
    """One migrated database for every run of this module; tenants keep the runs apart."""
    with migrated_database(chdb_dsn, "client") as ch:
        yield ch


@pytest.fixture(scope="module")
def diagnosed(
    client_store: ClickHouse, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[Run], DiagnosisReport]]:
    """``diagnosed(run)``: the diagnosis of that driver run (engine spans off, streamed), made once per module."""
    sink = OtlpSink()
    server = ThreadedServer(create_sink_app(sink), bind_loopback(), name="client-diagnosis-sink")
    server.start()
    reports: dict[Run, DiagnosisReport] = {}

    def diagnose(run: Run) -> DiagnosisReport:
        if run not in reports:
            result = run_driver(
                run.driver,
                server.url,
                Path(tmp_path_factory.mktemp("truth")) / "truth.json",
                stream=True,
                engine_spans=False,
                requests=run.requests,
                app=run.app,
                faults=run.faults,
            )
            # The driver process flushed its spans before it exited; the sink has every one.
            tenant = f"run-{len(reports)}"
            request, rejections = request_from_json(sink.otlp_json(set(result.trace_ids)))
            assert rejections == []
            Ingestor(ClickHouseTraceWriter(client_store)).export(request, tenant=tenant)
            report = diagnose_window(ClickHouseTraceReader(client_store), tenant=tenant)
            assert report.trace_count == run.requests and report.errors == [], report.errors
            reports[run] = report
        return reports[run]

    yield diagnose
    server.stop()


def client_findings(report: DiagnosisReport) -> list[Finding]:
    """The report's client-side findings, in rank order."""
    return [finding for finding in report.findings if finding.cause in CLIENT_SIDE_CAUSES]


def summary(report: DiagnosisReport) -> list[tuple[str, str, float, str]]:
    return [(f.cause, f.severity, f.confidence, f.title) for f in report.findings]


def test_every_client_fault_has_an_expected_cause() -> None:
    assert set(EXPECTED_CAUSE) == set(CLIENT_FAULTS)
    assert set(EXPECTED_CAUSE.values()) <= CLIENT_SIDE_CAUSES


@pytest.mark.parametrize("name", list(CLEAN_RUNS))
def test_a_clean_run_raises_no_client_finding(name: str, diagnosed: Callable[[Run], DiagnosisReport]) -> None:
    report = diagnosed(CLEAN_RUNS[name])
    assert client_findings(report) == [], summary(report)


@pytest.mark.parametrize(("fault", "run"), FAULT_RUNS, ids=[f"{fault}-{run.driver}" for fault, run in FAULT_RUNS])
def test_each_client_fault_is_the_top_client_finding(
    fault: str, run: Run, diagnosed: Callable[[Run], DiagnosisReport]
) -> None:
    report = diagnosed(run)
    found = client_findings(report)
    assert found and found[0].cause == EXPECTED_CAUSE[fault], summary(report)
    assert found[0].severity != "info" or fault in INFO_ONLY, summary(report)
    ids = found[0].evidence["example_trace_ids"]
    assert isinstance(ids, list) and ids and found[0].remedy
