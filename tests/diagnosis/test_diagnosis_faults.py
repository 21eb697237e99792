"""End to end with the instrumented stack: each fault switch alone makes its cause the top finding, and a clean
run shows nothing above ``info``, on this host as it is and beside a CPU-burning neighbour.

Each run replays the first 48 Azure conversation rows (catalogue, calculator and policy questions) with six
closed-loop users (the faults of :data:`OPEN_LOOP_S` open loop, as ``hotspan stack run`` replays by default),
sent as every configured tenant in turn as ``hotspan stack run`` does (the stack's default mixed tiers: P1, P2 and
P0), through the five services in this process, at engine speed 20 and with 100 ms catalogue
lookups (long enough that other requests' work arrives during most of them, which is what
``event_loop_blocking`` judges a blocking call by). Spans go through the collector's decode path into one embedded
ClickHouse database, each run under its own tenant, which keeps the diagnoses apart. The engine's ``/metrics``
page is scraped every 100 ms into the Prometheus stand-in (``prometheus_standin``), which diagnosis reads
through prometheus-api-client as it would a real Prometheus (``HOTSPAN_PROMETHEUS_URL``); beside it the host's
CPU pressure (Linux PSI, as node_exporter exports it) where the kernel has it. Every run is diagnosed twice, with
those metrics and from its traces alone (a ``hotspan serve`` without Prometheus): each must name its fault. A run
takes 4-8 s on a quiet host; every run happens once per session.

The matrix runs twice (issue 18): on the host as it is (``quiet``: no load of the test's own; a shared machine
may still be busy) and with a neighbour (:class:`cpu_neighbour.CpuNeighbour`: two spinning processes per CPU,
started before and stopped after each run). Beside the neighbour only the clean run and the faults in
:data:`NEIGHBOUR_FAULTS` run by default, to keep CI's time; ``HOTSPAN_FAULT_MATRIX_NEIGHBOUR=all`` runs every
fault there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import pytest
from cpu_neighbour import CpuNeighbour
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_standin import CPU_PRESSURE, PrometheusStandIn

from collector.ingest import Ingestor
from diagnosis import DiagnosisReport, PrometheusMetricsSource, diagnose_window
from instrumented_stack.capture import InMemorySpans
from instrumented_stack.faults import FAULTS, apply_faults
from instrumented_stack.loadgen import UserSettings, replay_closed_loop, replay_open_loop, replay_prompts
from instrumented_stack.prompts import PromptBuilder
from instrumented_stack.runner import with_speed
from instrumented_stack.stack import Stack, StackConfig
from instrumented_stack.tokenizer import default_tokenizer
from instrumented_stack.tools import ToolsConfig
from instrumented_stack.workload import load_workload
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.writer import ClickHouseTraceWriter
from testkit import migrated_database

ROWS = 48
USERS = 6
SPEED = 20.0
TOOL_LATENCY_S = 0.1
SCRAPE_INTERVAL_S = 0.1
INTENTS = {"catalogue": 2.0, "calculate": 1.0, "policy": 1.0}

EXPECTED_CAUSE = {
    "queue_saturation": "queue_saturation",
    "prefix_cache_off": "prefix_cache_unused",
    "tokenizer_cold_start": "tokenizer_cold_start",
    "connection_per_request": "connection_setup_per_request",
    "decode_bound": "decode_bound",
    "orchestration_cpu_hotspot": "orchestration_cpu_hotspot",
    "redundant_llm_calls": "redundant_llm_calls",
    "retrieval_topk_blowup": "retrieval_topk_blowup",
    "event_loop_blocking": "event_loop_blocking",
    "oversized_responses": "oversized_payload",
    "tier_flood": "admission_tier_starvation",
}
"""Fault switch -> the cause diagnosis must rank first."""
INFO_ALLOWED = {"decode_bound"}
"""Faults whose finding may be ``info``. decode_bound's cause is decode leading latency *and* TPOT growing with
the decoding batch; with six users the batch cannot grow (and the emulator's step overhead at speed 20 hides
the per-sequence cost), so the fault shows as decode leading latency: an info finding, ranked first because
nothing else is wrong."""
OPEN_LOOP_S = {"tier_flood": 30.0}
"""Faults replayed as ``hotspan stack run`` replays by default (open loop: each row at its arrival time, here for
that many seconds) instead of by the six closed-loop users: a flood that holds the gateway's slots also holds the
closed-loop users, who then send 16 P0 requests of which 4-7 meet it, too few for the starvation test at its
Bonferroni level (p = 0.02-0.03 against 0.005, three runs); open loop, users keep arriving during the flood, as
they do in production."""
HOST_CAUSE = "cpu_contention"
"""The host's condition, not a fault of the stack: ``info``, and left out when the top cause is compared (beside
the neighbour it may outrank decode_bound's info finding, rightly)."""
NEIGHBOUR_FAULTS = ("prefix_cache_off", "decode_bound", "event_loop_blocking")
"""Faults run beside the neighbour in CI, with the clean run: the ones issue 18 saw misnamed on a busy host, and
decode_bound, whose info finding ranks by confidence among the host's own findings. The others show in structure
(connect and loading spans, repeated prompt hashes, top_k attributes) or in a step's cost on its least delayed
calls; ``HOTSPAN_FAULT_MATRIX_NEIGHBOUR=all`` runs them beside the neighbour too
(``benchmarks/busy_host_matrix.py`` does)."""
REJECTED = '"type":"admission_rejected"'
"""The gateway's 429 body type for a request shed at admission (``instrumented_stack/gateway.py``)."""
NEIGHBOUR_RUN_MAX_S = 120.0
"""Longest a neighbour spins if the test never stops it (killed mid-run): a run takes seconds."""

Host = Literal["quiet", "neighbour"]
HOSTS: tuple[Host, ...] = ("quiet", "neighbour")


def _neighbour_faults() -> tuple[str, ...]:
    return tuple(EXPECTED_CAUSE) if os.environ.get("HOTSPAN_FAULT_MATRIX_NEIGHBOUR") == "all" else NEIGHBOUR_FAULTS


@dataclass(frozen=True)
class FaultRun:
    """One stack run: its spans as an OTLP export request, and the stand-in holding its engine metrics."""

    spans: ExportTraceServiceRequest
    prometheus_url: str


def test_every_fault_switch_has_an_expected_cause() -> None:
    assert set(EXPECTED_CAUSE) == set(FAULTS)


StackRun = Callable[[tuple[str, ...], Host], FaultRun]


@pytest.fixture(scope="session")
def stack_run() -> Iterator[StackRun]:
    """``stack_run(faults, host)``: the run with those fault switches on, quiet or beside the CPU neighbour, made
    once per session."""
    runs: dict[tuple[tuple[str, ...], Host], FaultRun] = {}
    standins: list[PrometheusStandIn] = []

    def run(faults: tuple[str, ...], host: Host) -> FaultRun:
        if (faults, host) not in runs:
            config = with_speed(
                apply_faults(StackConfig(tools=ToolsConfig(lookup_latency_s=TOOL_LATENCY_S)), faults), SPEED
            )
            settings = UserSettings(tenants=config.credentials())
            builder = PromptBuilder(default_tokenizer(), 7, INTENTS)
            open_loop_s = max((OPEN_LOOP_S.get(fault, 0.0) for fault in faults), default=0.0)
            # Open loop sends the rows due within its seconds: the default replay's 2 a second, 59 in 30 s.
            rows = load_workload("azure-conv", limit=ROWS if not open_loop_s else round(4 * open_loop_s))
            prompts = replay_prompts(builder, rows, settings)
            spans = InMemorySpans()
            standin = PrometheusStandIn().__enter__()
            standins.append(standin)
            neighbour = CpuNeighbour(max_s=NEIGHBOUR_RUN_MAX_S) if host == "neighbour" else contextlib.nullcontext()
            with neighbour, Stack(config, spans) as stack:
                standin.scrape_every(f"{stack.urls.engine}/metrics", SCRAPE_INTERVAL_S)
                standin.sample_cpu_pressure_every(SCRAPE_INTERVAL_S)
                if open_loop_s:
                    sent = replay_open_loop(stack.gateway_url, prompts, settings, duration_s=open_loop_s)
                else:
                    sent = replay_closed_loop(stack.gateway_url, prompts, settings, users=USERS)
                outcomes = asyncio.run(sent)
                standin.stop_scraping()
            # Under the flood the lowest tier's own users are shed at admission: the gateway working as designed.
            lowest = {key.tenant_id for key in config.gateway.tenants if key.tier == "P2"}
            failed = [o for o in outcomes if not o.ok and not (o.tenant_id in lowest and REJECTED in (o.error or ""))]
            assert failed == [], [o.error for o in failed]
            runs[(faults, host)] = FaultRun(encode_spans(spans.spans()), standin.url)
        return runs[(faults, host)]

    yield run
    for standin in standins:
        standin.__exit__(None, None, None)


@pytest.fixture(scope="module")
def fault_store(chdb_dsn: str) -> Iterator[ClickHouse]:
    """One migrated database for every run of this module (migrations take seconds; tenants separate runs)."""
    with migrated_database(chdb_dsn, "faults") as ch:
        yield ch


Metrics = Literal["prometheus", "traces"]
METRICS: tuple[Metrics, ...] = ("prometheus", "traces")


def _diagnose(run: FaultRun, store: ClickHouse, tenant: str, metrics: Metrics) -> DiagnosisReport:
    """The run's diagnosis, its spans stored once under ``tenant``; with the engine metrics or without."""
    reader = ClickHouseTraceReader(store)
    if not reader.search_spans(TraceQuery(limit=1), tenant=tenant).height:
        Ingestor(ClickHouseTraceWriter(store)).export(run.spans, tenant=tenant)
    # A step as fine as the scrapes: a run lasts a few seconds.
    source = PrometheusMetricsSource(run.prometheus_url, min_step_s=SCRAPE_INTERVAL_S)
    report = diagnose_window(reader, tenant=tenant, metrics_source=source if metrics == "prometheus" else None)
    # Every root span is a request: the users' rows, and the batch client's where a fault adds one.
    roots = sum(
        not span.parent_span_id for rs in run.spans.resource_spans for ss in rs.scope_spans for span in ss.spans
    )
    expected = "prometheus" if metrics == "prometheus" else "none"
    assert report.trace_count == roots >= ROWS and report.metrics == expected and report.errors == []
    return report


def _summary(report: DiagnosisReport) -> list[tuple[str, str, float]]:
    return [(f.cause, f.severity, f.confidence) for f in report.findings]


@pytest.mark.parametrize("metrics", METRICS)
@pytest.mark.parametrize("host", HOSTS)
def test_a_clean_run_shows_nothing_above_info(
    host: Host, metrics: Metrics, stack_run: StackRun, fault_store: ClickHouse
) -> None:
    report = _diagnose(stack_run((), host), fault_store, f"clean-{host}", metrics)
    assert [f for f in report.findings if f.severity != "info"] == [], _summary(report)
    if host == "neighbour" and metrics == "prometheus" and CPU_PRESSURE.exists():
        # Two spinning processes per CPU: the measured pressure names the host's condition.
        assert HOST_CAUSE in {f.cause for f in report.findings}, _summary(report)


@pytest.mark.parametrize("metrics", METRICS)
@pytest.mark.parametrize(
    ("fault", "host"),
    [(fault, "quiet") for fault in EXPECTED_CAUSE] + [(fault, "neighbour") for fault in _neighbour_faults()],
)
def test_each_fault_alone_is_the_top_finding(
    fault: str,
    host: Host,
    metrics: Metrics,
    stack_run: StackRun,
    fault_store: ClickHouse,
) -> None:
    report = _diagnose(stack_run((fault,), host), fault_store, f"{fault.replace('_', '-')}-{host}", metrics)
    causes = [f for f in report.findings if f.cause != HOST_CAUSE]
    top = causes[0] if causes else None
    assert top is not None and top.cause == EXPECTED_CAUSE[fault], _summary(report)
    assert top.severity != "info" or fault in INFO_ALLOWED, _summary(report)
    assert all(f.severity == "info" for f in report.findings if f.cause == HOST_CAUSE), _summary(report)
