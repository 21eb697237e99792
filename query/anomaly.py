"""Anomaly scoring, read-only: the series of a window against their robust baselines, the diagnosis of each root
service's requests against its baseline window's, and how an open incident's series score now. The incident
lifecycle that acts on these scores (open, follow, resolve, write, notify) is :mod:`incidents.lifecycle`'s.

**Series.** Per (service, operation, span kind), from the per-minute RED rollup (``hotspan_red_minutes``): p95
latency (``p95_ms``), error rate (``error_rate``, 0..1) and throughput (``throughput_per_min``); per (root service,
stage), from the trace pipeline's request summaries: the p95 of the stage's critical-path time per request
(``p95_ms``; a stage's error rate and throughput are its root's, already judged on the root's operation).
Per (root service, diagnosis cause): the severity of the cause in the window's diagnosis of that root service's
requests (``severity``, :data:`SEVERITY_LEVELS`): a fault can cost little latency at the moment (connections
opened per call, megabyte responses, a prefix cache switched off on a lightly loaded engine) and still be a
fault the diagnosis rules name from structure (connect spans, body sizes, cached-token counts).

**Windows.** An evaluation at ``now`` judges the last ``window_minutes`` whole minutes ending ``settle_s`` before
``now`` (spans of a minute arrive until its requests end and their exporters flush; stage rows once the pipeline
analysed the traces). A series' baseline is the same span of minutes one day earlier (``baseline_minutes``
centred on the window's time of day: seasonal) when that holds ``min_baseline_minutes`` samples, else the
``baseline_minutes`` minutes before the window (trailing).

**Judgement.** :mod:`analysis.baseline`: median and MAD of the baseline's per-minute values, robust z-score of the
window's value above ``z_limit`` plus a material change (:data:`METRIC_RULES`), then counted call by call: more of
the window's calls slower than the baseline's p95 (or failed) than the baseline window's share explains, at the same
false-alarm rate (a binomial test, Kupiec's proportion of failures). Small samples judge nothing: a
minute enters a latency or error-rate baseline with ``min_minute_calls`` calls, a window is judged with
``min_calls``, and throughput only for series whose baseline median is ``min_calls`` per minute. A finding
deviates when the window's diagnosis of a root service with ``min_calls`` requests has its cause at ``warning`` or
worse and the baseline window's diagnosis of that service (seasonal when it holds ``min_calls`` requests, else
trailing; neither: not judged) had it lower or not at all (``info`` is worth knowing, not a deviation; a warning the
baseline had too is how that service runs); the rules' own thresholds and least samples judge the finding.

**Which services are diagnosed.** A diagnosis reads a root service's traces and runs every rule over them (0.25 to
0.55 s on two cores): one per root service and minute would take a fleet of a thousand root services minutes per
minute. So only a root service that moved is diagnosed (:meth:`AnomalyScorer.moved`): one with a deviating series
(its stage series, or an operation its window's requests hold), one with a stage series no baseline judges (a fresh
store's first minutes, a new stage: nothing to tell a change from), one whose requests changed shape since the window
before (:func:`shape_moved`: spans per request of a (service, name) rising, a larger body: what the structural rules
name causes from without any latency moving), and every service of an open incident (its findings followed until it
resolves). A root service that moved costs one diagnosis of its window, one or two of its baseline only when a
warning shows, and one or two per open incident that still deviates (its findings completed against its baseline,
whose diagnosis is made once while the incident is open). The series themselves are read for every tenant at once
(:meth:`AnomalyScorer.series`: a few queries, whatever the number of tenants and series; baseline minutes read
before and settled since are kept, :mod:`query.anomaly_minutes`) and scored a tenant at a time
(:meth:`AnomalyScorer.scored`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from analysis.baseline import Z_LIMIT, MetricRule, exceeds_baseline_rate, robust_baselines, robust_scores
from diagnosis import CAUSE_STAGES, LATENCY_SHARE_EVIDENCE, SEVERITIES, DiagnosisReport, Finding
from query.anomaly_minutes import SETTLED_NS, SeriesMinutes
from query.diagnosis import DiagnosisService
from query.topology import Topology, window_topology
from storage.incident_store import (
    TENANT_SHAPE_SCHEMA,
    CountedSeries,
    Incident,
    IncidentKind,
    IncidentStore,
    SeriesKind,
)
from storage.reader import TraceQuery, TraceReader
from storage.rollup_reader import RollupReader
from units import NS_PER_MS, NS_PER_S

log = logging.getLogger(__name__)


MINUTE_NS = 60 * NS_PER_S
DAY_NS = 86_400 * NS_PER_S
KEYS = ("kind", "service", "name", "span_kind", "metric")
"""Columns naming one series."""

METRIC_RULES: dict[str, MetricRule] = {
    "p95_ms": MetricRule("up", relative_floor=0.1, absolute_floor=1.0, min_ratio=2.0, min_delta=10.0),
    "error_rate": MetricRule("up", relative_floor=0.0, absolute_floor=0.01, min_delta=0.05),
    "throughput_per_min": MetricRule("down", relative_floor=0.1, absolute_floor=1.0, min_ratio=2.0),
}
"""Per metric: latency must double and grow 10 ms (a p95 of a few ms moves by that much with the host's load alone,
and a loaded two-core host slowed half the LLM calls of a clean minute 1.6-1.7x; the stack's injected faults moved
their series 2.5x or more), the error rate 5 points, throughput halve, each beyond the robust z limit with the scale
floored at 10 % of the median (latency, throughput) or 1 point (error rate)."""

SEVERITY_LEVELS = ("none", *SEVERITIES)
"""A finding series' value: the index of its cause's severity in a diagnosis (``none``: the cause is absent)."""
FINDING_LEVEL = SEVERITY_LEVELS.index("warning")
"""Least severity at which a finding is a deviation (opens an incident, or keeps it open)."""
FINDING_KIND: IncidentKind = "finding"

_KINDS: tuple[SeriesKind, ...] = ("operation", "stage")


@dataclass(frozen=True)
class AnomalySettings:
    """The detector's knobs (module docstring); ``hotspan.settings`` sets them from ``HOTSPAN_ANOMALY_*``."""

    window_minutes: int = 1
    baseline_minutes: int = 30
    min_baseline_minutes: int = 5
    settle_s: float = 20.0
    min_calls: int = 20
    min_minute_calls: int = 5
    z_limit: float = Z_LIMIT
    close_z: float = Z_LIMIT / 2
    example_traces: int = 5
    diagnosis_traces: int = 500
    findings: bool = True


@dataclass(frozen=True)
class AnomalyWindow:
    """The minutes one evaluation judges, ns since the epoch: ``[start_ns, end_ns)``; its trailing baseline
    ``[baseline_start_ns, start_ns)`` and its seasonal one ``[seasonal_start_ns, seasonal_end_ns)`` (module
    docstring)."""

    start_ns: int
    end_ns: int
    baseline_start_ns: int
    seasonal_start_ns: int
    seasonal_end_ns: int


@dataclass(frozen=True)
class TenantSeries:
    """One tenant's series of a window (:meth:`AnomalyScorer.series`): ``observed``, the window's value of each
    (:data:`KEYS`, ``bucket_ns``, ``value``, ``calls``); ``trailing`` and ``seasonal``, the robust baselines
    (:func:`analysis.baseline.robust_baselines`: :data:`KEYS`, ``median``, ``sigma``, ``samples``) of the trailing
    and of the seasonal baseline's minutes, every series with a value in them; ``shape``, what its root services'
    requests are made of in the window and the window before (:data:`storage.incident_store.SHAPE_SCHEMA`; empty with
    ``findings`` off)."""

    observed: pl.DataFrame
    trailing: pl.DataFrame
    seasonal: pl.DataFrame
    shape: pl.DataFrame


class AnomalyScorer:
    """Scores one tenant's series and diagnoses in a window; reads only (what to do with the scores is
    :class:`incidents.lifecycle.AnomalyDetector`'s).

    Args:
        series: the per-minute series and their call-by-call counts (:class:`storage.incident_store.IncidentStore`,
            read only here).
        reader: traces, for examples (the query room's store).
        rollups: the service-graph rollup, for neighbours and grouping (the query room's store).
        diagnosis: the query room's diagnosis (the same rules the API, the UI and the SLO alerts use).
        settings: the knobs.

    Attributes:
        diagnoses: diagnoses made since it was built (each a read of up to ``diagnosis_traces`` traces and the rules
            over them: what an evaluation spends most of its time on).

    Thread safety: none; its one caller (the lifecycle) serialises its evaluations. Keeps the baseline windows'
    diagnoses of open incidents (:meth:`keep_baselines`).
    """

    def __init__(
        self,
        series: IncidentStore,
        reader: TraceReader,
        rollups: RollupReader,
        diagnosis: DiagnosisService,
        settings: AnomalySettings | None = None,
    ) -> None:
        self._store = series
        self._reader = reader
        self._rollups = rollups
        self._diagnosis = diagnosis
        self.settings = settings or AnomalySettings()
        self._baselines: dict[tuple[str, str, int, int], DiagnosisReport] = {}
        self._minutes = SeriesMinutes(series)
        self.diagnoses = 0

    def keep_baselines(self, open_incidents: Iterable[Incident]) -> None:
        """Forget the baseline diagnoses no incident of ``open_incidents`` uses (incidents no longer open, windows
        that opened none): they are not needed again."""
        kept = {_baseline_key(incident) for incident in open_incidents}
        self._baselines = {key: report for key, report in self._baselines.items() if key in kept}

    def window(self, now_ns: int) -> AnomalyWindow:
        """The window an evaluation at ``now_ns`` judges: the last ``window_minutes`` whole minutes ending
        ``settle_s`` before it, with its baselines."""
        s = self.settings
        end = (now_ns - int(s.settle_s * NS_PER_S)) // MINUTE_NS * MINUTE_NS
        start = end - s.window_minutes * MINUTE_NS
        half = (s.baseline_minutes * MINUTE_NS) // 2
        return AnomalyWindow(
            start_ns=start,
            end_ns=end,
            baseline_start_ns=start - s.baseline_minutes * MINUTE_NS,
            seasonal_start_ns=start - DAY_NS - half,
            seasonal_end_ns=end - DAY_NS + half,
        )

    def series(self, window: AnomalyWindow, tenants: Iterable[str]) -> dict[str, TenantSeries]:
        """The series of ``window`` of each of ``tenants``, and the shape of its root services' requests (empty
        frames for one without rows), from a few reads for every tenant at once (:mod:`query.anomaly_minutes`: the
        baseline minutes an earlier evaluation read and that have settled since are not read again)."""
        s = self.settings
        observed, trailing, seasonal = [], [], []
        spans = [(window.baseline_start_ns, window.start_ns), (window.seasonal_start_ns, window.seasonal_end_ns)]
        for kind in _KINDS:
            whole = self._store.series(kind, window.start_ns, window.end_ns, tenant=None, whole=True)
            observed.append(_metric_values(whole, kind, min_calls=s.min_calls, per_minute=s.window_minutes))
            minutes = self._minutes.read(kind, spans, settled_ns=window.start_ns - SETTLED_NS)
            values = [_metric_values(rows, kind, min_calls=s.min_minute_calls, per_minute=1) for rows in minutes]
            trailing.append(robust_baselines(values[0], ("tenant", *KEYS)))
            seasonal.append(robust_baselines(values[1], ("tenant", *KEYS)))
        # The store's rows come in no order; one series a row, sorted, keeps what is scored first the same each time.
        frames = [pl.concat(found).sort("tenant", *KEYS) for found in (observed, trailing, seasonal)]
        frames.append(self._shape(window))
        parts = [frame.partition_by("tenant", as_dict=True, include_key=False) for frame in frames]
        empty = [frame.clear().drop("tenant") for frame in frames]
        return {
            tenant: TenantSeries(*(part.get((tenant,), blank) for part, blank in zip(parts, empty, strict=True)))
            for tenant in tenants
        }

    def _shape(self, window: AnomalyWindow) -> pl.DataFrame:
        """What every tenant's root services' requests are made of in ``window`` and the window before it
        (:meth:`storage.incident_store.IncidentStore.root_shape`): what :meth:`moved` screens; no rows with
        ``findings`` off."""
        if not self.settings.findings:
            return pl.DataFrame(schema=TENANT_SHAPE_SCHEMA)
        previous = 2 * window.start_ns - window.end_ns
        size_keys = self._diagnosis.size_keys
        return self._store.root_shape(previous, window.start_ns, window.end_ns, size_keys=size_keys, tenant=None)

    def scored(self, series: TenantSeries, window: AnomalyWindow) -> pl.DataFrame:
        """Every judged series of one tenant (``series``, :meth:`series`): :data:`KEYS`, ``value``, ``calls``,
        ``median``, ``sigma``, ``samples``, ``scale``, ``score``, ``deviates``, ``seasonal``, ``baseline_start_ns``,
        ``baseline_end_ns``."""
        s = self.settings
        scored = []
        for kind in _KINDS:
            trailing = series.trailing.filter(pl.col("kind") == kind)
            seasonal = series.seasonal.filter((pl.col("kind") == kind) & (pl.col("samples") >= s.min_baseline_minutes))
            chosen = pl.concat(
                [
                    seasonal.with_columns(
                        pl.lit(True).alias("seasonal"),
                        pl.lit(window.seasonal_start_ns).alias("baseline_start_ns"),
                        pl.lit(window.seasonal_end_ns).alias("baseline_end_ns"),
                    ),
                    trailing.join(seasonal.select(KEYS), on=list(KEYS), how="anti").with_columns(
                        pl.lit(False).alias("seasonal"),
                        pl.lit(window.baseline_start_ns).alias("baseline_start_ns"),
                        pl.lit(window.start_ns).alias("baseline_end_ns"),
                    ),
                ]
            )
            for metric, rule in METRIC_RULES.items():
                baselines = chosen.filter(pl.col("metric") == metric)
                if metric == "throughput_per_min":
                    baselines = baselines.filter(pl.col("median") >= s.min_calls)
                mine = series.observed.filter((pl.col("kind") == kind) & (pl.col("metric") == metric))
                scored.append(
                    robust_scores(mine, baselines, KEYS, rule, z_limit=s.z_limit, min_samples=s.min_baseline_minutes)
                )
        return pl.concat(scored, how="diagonal_relaxed")

    def moved(self, series: TenantSeries, scored: pl.DataFrame, open_incidents: Iterable[Incident]) -> set[str]:
        """The services of one tenant whose window is worth a diagnosis (module docstring, **Which services are
        diagnosed**): those with a deviating series in ``scored`` (:meth:`scored` of ``series``), the root services
        whose window's requests hold a deviating operation, those with a stage series ``series.observed`` has a value
        of but no baseline judged (too few minutes of history, or a stage new to it: nothing to tell a change from),
        those whose requests changed shape since the window before (:func:`shape_moved` of ``series.shape``), and
        every service of ``open_incidents``. Not every one is a root service with ``min_calls`` requests;
        :meth:`root_diagnoses` diagnoses those that are. Empty with ``findings`` off."""
        if not self.settings.findings:
            return set()
        observed, shape = series.observed, series.shape
        unjudged = observed.filter((pl.col("kind") == "stage") & pl.col("value").is_not_null()).join(
            scored, on=KEYS, how="anti"
        )
        deviating = scored.filter(pl.col("deviates")).select("kind", "service", "name").unique()
        holding = shape.filter(pl.col("current")).join(
            deviating.filter(pl.col("kind") == "operation"),
            left_on=["span_service", "name"],
            right_on=["service", "name"],
        )
        moved = set(deviating["service"]) | set(holding["service"]) | set(unjudged["service"])
        moved |= shape_moved(shape, min_requests=self.settings.min_calls)
        return moved | {service for incident in open_incidents for service in incident.services}

    def root_diagnoses(
        self, tenant: str, observed: pl.DataFrame, window: AnomalyWindow, moved: Collection[str]
    ) -> dict[str, DiagnosisReport]:
        """The window's diagnosis of each root service of ``moved`` (:meth:`moved`) with ``min_calls`` requests in
        it (read off its stage series), by service; none with ``findings`` off. A service whose diagnosis fails is
        left out (logged): its findings are not judged."""
        if not self.settings.findings:
            return {}
        roots = (
            observed.filter((pl.col("kind") == "stage") & pl.col("service").is_in(list(moved)))
            .group_by("service")
            .agg(pl.col("calls").max())
            .filter(pl.col("calls") >= self.settings.min_calls)
        )
        reports = {}
        for service in sorted(roots["service"].to_list()):
            report = self._diagnose(tenant, service, window.start_ns, window.end_ns)
            if report is not None:
                reports[service] = report
        return reports

    def new_findings(self, tenant: str, reports: dict[str, DiagnosisReport], window: AnomalyWindow) -> pl.DataFrame:
        """Finding rows that deviate (module docstring), shaped as :meth:`scored`'s rows plus the finding's
        ``example_trace_ids``: ``value`` the window's severity level, ``median`` the baseline window's, ``score``
        the rise."""
        rows = []
        for service, report in reports.items():
            severe = [f for f in report.findings if SEVERITY_LEVELS.index(f.severity) >= FINDING_LEVEL]
            if not severe:
                continue
            chosen = self._finding_baseline(tenant, service, window)
            if chosen is None:
                continue
            baseline, (baseline_start, baseline_end, seasonal) = chosen
            for finding in severe:
                level, before = SEVERITY_LEVELS.index(finding.severity), _severity_level(baseline, finding.cause)
                if level <= before:
                    continue
                examples = finding.evidence.get("example_trace_ids")
                rows.append(
                    {
                        "kind": FINDING_KIND,
                        "service": service,
                        "name": finding.cause,
                        "span_kind": "",
                        "metric": "severity",
                        "value": float(level),
                        "calls": report.trace_count,
                        "median": float(before),
                        "scale": 1.0,
                        "score": float(level - before),
                        "deviates": True,
                        "seasonal": seasonal,
                        "baseline_start_ns": baseline_start,
                        "baseline_end_ns": baseline_end,
                        "example_trace_ids": [str(i) for i in examples] if isinstance(examples, list) else [],
                    }
                )
        return pl.DataFrame(rows, schema=_FINDING_SCHEMA)

    def _finding_baseline(
        self, tenant: str, service: str, window: AnomalyWindow
    ) -> tuple[DiagnosisReport, tuple[int, int, bool]] | None:
        """The diagnosis a finding of ``service`` is judged against, with its window's start, end (ns) and whether
        it is seasonal: as for series, the same time one day earlier when that holds ``min_calls`` requests, else
        the trailing baseline window when that does; None when neither does (nothing to be new against)."""
        for start, end, seasonal in (
            (window.seasonal_start_ns, window.seasonal_end_ns, True),
            (window.baseline_start_ns, window.start_ns, False),
        ):
            report = self._baseline_diagnosis(tenant, service, start, end)
            if report is not None and report.trace_count >= self.settings.min_calls:
                return report, (start, end, seasonal)
        return None

    def _diagnose(
        self, tenant: str, service: str, start_ns: int, end_ns: int, *, limit: int | None = None
    ) -> DiagnosisReport | None:
        """The diagnosis of ``service``'s traces in ``[start_ns, end_ns)`` (the ``limit`` most recently active,
        default ``diagnosis_traces``); None when it fails (logged). Counted in :attr:`diagnoses`."""
        self.diagnoses += 1
        try:
            return self._diagnosis.diagnose(
                tenant=tenant,
                start_ns=start_ns,
                end_ns=end_ns - 1,
                service=service,
                limit=limit or self.settings.diagnosis_traces,
            )
        except Exception:
            log.exception("diagnosis of %s's traces failed; their findings are not judged or named", service)
            return None

    def _baseline_diagnosis(self, tenant: str, service: str, start_ns: int, end_ns: int) -> DiagnosisReport | None:
        """The diagnosis of a baseline window (:meth:`_diagnose`), made once while an open incident uses it: the
        window lies before the judged one and has settled, so the finding that opens an incident and every later
        minute it still deviates in compare against one report. A report some rule failed in, or made without
        the engine metrics it was configured to read, is used but not kept: the next minute diagnoses again.
        :meth:`keep_baselines` forgets those no open incident uses."""
        key = (tenant, service, start_ns, end_ns)
        if key in self._baselines:
            return self._baselines[key]
        report = self._diagnose(tenant, service, start_ns, end_ns)
        if report is not None and not report.errors and not report.metrics.startswith("unavailable"):
            self._baselines[key] = report
        return report

    def confirmed(self, tenant: str, deviating: pl.DataFrame, window: AnomalyWindow) -> pl.DataFrame:
        """The deviating rows the window's calls bear out one by one (:func:`analysis.baseline.exceeds_baseline_rate` at
        ``z_limit``): latency where more calls are slower than the baseline's p95 (the median of its minutes') than the
        baseline window's share of calls slower than it explains, error rate where more calls failed than the baseline's
        error rate explains. A p95 of a few dozen calls is their slowest two or three, which one host stall delays; the
        count needs slowness to be common. Throughput rows are counts already and pass."""
        kept = []
        for row in deviating.iter_rows(named=True):
            if row["metric"] == "throughput_per_min":
                kept.append(True)
                continue
            counted = self._store.exceedances(
                CountedSeries(
                    kind=row["kind"],
                    service=row["service"],
                    name=row["name"],
                    span_kind=row["span_kind"],
                    # Durations are whole ns; rounding up keeps a p95 interpolated a hair below equal values of
                    # a steady series from counting those values as slower.
                    threshold_ns=math.ceil(float(row["median"]) * NS_PER_MS),
                    start_ns=window.start_ns,
                    end_ns=window.end_ns,
                    baseline_start_ns=int(row["baseline_start_ns"]),
                    baseline_end_ns=int(row["baseline_end_ns"]),
                ),
                tenant=tenant,
            )
            if row["metric"] == "p95_ms":
                counts = (counted.over, counted.calls, counted.baseline_over, counted.baseline_calls)
            else:
                counts = (counted.errors, counted.calls, counted.baseline_errors, counted.baseline_calls)
            kept.append(exceeds_baseline_rate(*counts, z_limit=self.settings.z_limit))
            log.debug(
                "%s %s %s: %d of %d calls beyond the baseline p95 or failed, baseline %d of %d", *_named(row), *counts
            )
        return deviating.filter(pl.Series(kept, dtype=pl.Boolean))

    def deviations(self, incident: Incident, observed: pl.DataFrame, reports: dict[str, DiagnosisReport]) -> list[bool]:
        """Whether each of open ``incident``'s series that could be judged in this window still deviates: a measured
        series above ``close_z`` against the baseline the incident opened with (its value in ``observed``,
        :attr:`TenantSeries.observed`), a finding at ``warning`` or worse in its service's diagnosis (``reports``,
        :meth:`root_diagnoses`). Empty when none could be judged."""
        measured = [series for series in incident.series if series["kind"] != FINDING_KIND]
        deviates: list[bool] = []
        if measured:
            kept = pl.DataFrame(
                [
                    {key: series[key] for key in KEYS}
                    | {"median": series["baseline"], "sigma": series["baseline_scale"], "samples": 1 << 30}
                    for series in measured
                ]
            ).cast({"samples": pl.UInt32, "median": pl.Float64, "sigma": pl.Float64})
            for metric, rule in METRIC_RULES.items():
                mine = observed.filter(pl.col("metric") == metric)
                scores = robust_scores(
                    mine, kept.filter(pl.col("metric") == metric), KEYS, rule, z_limit=self.settings.close_z
                )
                deviates += scores["deviates"].to_list()
        deviates += [
            _severity_level(reports[series["service"]], series["name"]) >= FINDING_LEVEL
            for series in incident.series
            if series["kind"] == FINDING_KIND and series["service"] in reports
        ]
        return deviates

    def findings(
        self,
        tenant: str,
        service: str,
        window: AnomalyWindow,
        baseline_start: int,
        baseline_end: int,
        stages: Collection[str],
        diagnosed: DiagnosisReport | None,
    ) -> list[dict[str, Any]]:
        """The window's findings against the baseline window's (:func:`compare_findings`, ``stages`` the
        incident's deviating stage series): each with ``new`` when the baseline window did not have that cause
        at that severity or worse, or had it with a lower share of latency; new ones first. Then the new findings
        of the span across the window's start (as long again before it as the window lasts, and the window) that
        neither has: a cause that is a change within one diagnosis, such as ``admission_tier_starvation`` (a
        lower tier's load rising while a higher tier slows), is seen where the change is, and a fault that fills
        the whole window leaves no change inside it. ``diagnosed``: the window's diagnosis of ``service`` when
        this evaluation made it already (:meth:`root_diagnoses`). Empty when diagnosis fails (an incident never
        waits on it)."""
        now = diagnosed or self._diagnose(tenant, service, window.start_ns, window.end_ns)
        before = self._baseline_diagnosis(tenant, service, baseline_start, baseline_end)
        if now is None or before is None:
            return []
        found = compare_findings(now, before, stages)
        # Twice the window's traces: a diagnosis reads the most recently active ones, and with the window's own
        # limit a busy service's span would hold only the window, not the change into it.
        limit = 2 * self.settings.diagnosis_traces
        across = self._diagnose(tenant, service, 2 * window.start_ns - window.end_ns, window.end_ns, limit=limit)
        if across is not None:
            seen = {finding["cause"] for finding in found}
            changes = [f for f in compare_findings(across, before, stages) if f["new"] and f["cause"] not in seen]
            found = [f for f in found if f["new"]] + changes + [f for f in found if not f["new"]]
        return found

    def examples(self, tenant: str, top: dict[str, Any], window: AnomalyWindow) -> list[str]:
        """The slowest (latency, throughput) or failed (error rate) traces of the primary series in the window; a
        finding's own examples."""
        if top["kind"] == FINDING_KIND:
            return list(top["example_trace_ids"])[: self.settings.example_traces]
        operation = top["kind"] == "operation"
        query = TraceQuery(
            service=top["service"],
            operation=top["name"] if operation else None,
            span_kind=top["span_kind"] if operation else None,
            start_ns=window.start_ns,
            end_ns=window.end_ns - 1,
            status_code="Error" if top["metric"] == "error_rate" else None,
            min_duration_ns=round(top["median"] * NS_PER_MS) if top["metric"] == "p95_ms" and operation else None,
            limit=100,
        )
        try:
            found = self._reader.search(query, tenant=tenant)
        except Exception:
            log.exception("example traces of an incident on %s could not be read", top["service"])
            return []
        slowest = found.sort("duration_ns", descending=True).head(self.settings.example_traces)
        return [str(trace_id) for trace_id in slowest["trace_id"].to_list()]

    def topology(self, tenant: str, window: AnomalyWindow) -> Topology:
        """The window's service graph (:func:`query.topology.window_topology`): what groups deviating series and
        names an incident's neighbours."""
        return window_topology(self._rollups, window.start_ns, window.end_ns, tenant=tenant)


def _metric_values(rows: pl.DataFrame, kind: SeriesKind, *, min_calls: int, per_minute: int) -> pl.DataFrame:
    """Series rows (:data:`storage.incident_store.SERIES_SCHEMA`) as one row per series, bucket and metric: the
    ``tenant``, the :data:`KEYS`, ``bucket_ns``, ``value`` and ``calls``. Latency and error rate need ``min_calls``
    calls in the bucket; throughput is calls per minute (the bucket spans ``per_minute`` minutes); stages give latency
    only."""
    enough = pl.col("calls") >= min_calls
    metrics = {
        "p95_ms": pl.when(enough).then(pl.col("p95_ns") / NS_PER_MS),
        "error_rate": pl.when(enough).then(pl.col("errors") / pl.col("calls")),
        "throughput_per_min": pl.col("calls") / per_minute,
    }
    chosen = {"p95_ms": metrics["p95_ms"]} if kind == "stage" else metrics
    base = rows.with_columns(pl.lit(kind).alias("kind"))
    frames = [
        base.select(
            "tenant",
            "kind",
            "service",
            "name",
            "span_kind",
            pl.lit(metric).alias("metric"),
            "bucket_ns",
            value.cast(pl.Float64).alias("value"),
            "calls",
        )
        for metric, value in chosen.items()
    ]
    return pl.concat(frames)


SHAPE_RISE_PER_REQUEST = 0.25
"""Spans of one (service, name) per request more than in the window before that make a root service's requests
change shape (with :data:`SHAPE_RISE_RATIO`): a connect span under a quarter of the requests, a second LLM call in a
quarter of them. Structural causes (``connection_setup_per_request``, ``tokenizer_cold_start``,
``redundant_llm_calls``, ``repeated_tool_calls``, ``provider_throttling``'s retries) show as spans that were not
there; a cause only a small share of requests shows is seen once it grows or its latency moves."""
SHAPE_RISE_RATIO = 1.5
"""... and at least this many times as many per request as in the window before (a span every request has varies by
a few per cent between minutes of a steady service)."""
BYTES_RISE_RATIO = 2.0
"""A largest body (``oversized_payload``'s size attributes) at least this many times the window before's largest:
megabyte responses where there were kilobytes, or where there was no size at all."""


def shape_moved(shape: pl.DataFrame, *, min_requests: int) -> set[str]:
    """The root services whose requests changed shape from the window before to the window (``shape``:
    :data:`storage.incident_store.SHAPE_SCHEMA` rows): a (service, name) with :data:`SHAPE_RISE_PER_REQUEST` more
    spans per request and :data:`SHAPE_RISE_RATIO` times as many, a largest body :data:`BYTES_RISE_RATIO` times the
    window before's, or fewer than ``min_requests`` requests in the window before (nothing to tell a change from).
    Only rises: a cause the diagnosis names from structure is there when something is, and a finding that goes away
    belongs to an open incident, which is diagnosed anyway. Pure."""
    keys = ["service", "span_service", "name"]
    per_request = shape.with_columns((pl.col("spans") / pl.col("requests")).alias("rate"))
    before = per_request.filter(~pl.col("current"))
    compared = (
        per_request.filter(pl.col("current"))
        .join(before.select(*keys, "rate", "max_bytes"), on=keys, how="left", suffix="_before")
        .join(
            before.group_by("service").agg(pl.col("requests").max().alias("requests_before")), on="service", how="left"
        )
        .with_columns(pl.col("rate_before", "max_bytes_before", "requests_before").fill_null(0))
    )
    rise = pl.col("rate") - pl.col("rate_before")
    changed = compared.filter(
        (pl.col("requests_before") < min_requests)
        | ((rise >= SHAPE_RISE_PER_REQUEST) & (pl.col("rate") >= SHAPE_RISE_RATIO * pl.col("rate_before")))
        | ((pl.col("max_bytes") > 0) & (pl.col("max_bytes") >= BYTES_RISE_RATIO * pl.col("max_bytes_before")))
    )
    return set(changed["service"].to_list())


def compare_findings(
    window: DiagnosisReport, baseline: DiagnosisReport, deviating_stages: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The findings of ``window`` as dicts (``cause``, ``title``, ``severity``, ``confidence``, ``remedy``,
    ``new``, ``baseline_title``): ``new`` when ``baseline`` has no finding of that cause at that severity or
    worse, or has it at the same severity with a share of latency (:data:`diagnosis.LATENCY_SHARE_EVIDENCE`) at
    least :data:`WORSE_SHARE_RISE` lower, or lower at all where the cause's stage
    (:data:`diagnosis.CAUSE_STAGES`) is among ``deviating_stages`` (the incident's stage series): ``decode_bound``
    is ``info`` whenever decode leads latency, the normal state of serving, so outputs growing eightfold change
    its share (73% to 91% on the stack; 76% to 83% in a live minute the fault filled half of, where the
    ``llm.decode`` p95 deviated x3.3), not its severity. ``baseline_title``: the baseline's finding of that cause,
    for the before and after. New ones first, then in the window report's rank order. Pure."""
    before = {f.cause: f for f in baseline.findings}
    found = [
        {
            "cause": f.cause,
            "title": f.title,
            "severity": f.severity,
            "confidence": f.confidence,
            "remedy": f.remedy,
            "new": _is_new(f, before.get(f.cause), CAUSE_STAGES.get(f.cause) in deviating_stages),
            "baseline_title": before[f.cause].title if f.cause in before else None,
        }
        for f in window.findings
    ]
    return sorted(found, key=lambda f: not f["new"])


def _baseline_key(incident: Incident) -> tuple[str, str, int, int]:
    """The key of an incident's baseline diagnosis in ``AnomalyScorer._baselines``."""
    return incident.tenant, incident.service, incident.baseline_start_ns, incident.baseline_end_ns


WORSE_SHARE_RISE = 0.1
"""Rise of a finding's share of end-to-end latency (0..1), baseline to window, that makes a finding of unchanged
severity new. Ten points: a clean minute of the stack moved decode's share by 2.5 (73% to 75%), the decode_bound
fault by 18.6."""


def _is_new(finding: Finding, baseline: Finding | None, stage_deviates: bool) -> bool:
    """Whether ``finding`` is worse than ``baseline``'s finding of its cause (see :func:`compare_findings`);
    ``stage_deviates``: the cause's stage is among the incident's deviating series."""
    level = SEVERITY_LEVELS.index(finding.severity)
    if baseline is None or SEVERITY_LEVELS.index(baseline.severity) < level:
        return level > 0
    key = LATENCY_SHARE_EVIDENCE.get(finding.cause)
    if key is None or baseline.severity != finding.severity:
        return False
    now, then = finding.evidence.get(key), baseline.evidence.get(key)
    if not (isinstance(now, int | float) and isinstance(then, int | float)):
        return False
    return now - then >= WORSE_SHARE_RISE or (stage_deviates and now > then)


def _severity_level(report: DiagnosisReport, cause: str) -> int:
    """The index in :data:`SEVERITY_LEVELS` of ``cause``'s finding in ``report`` (0 when absent)."""
    return max((SEVERITY_LEVELS.index(f.severity) for f in report.findings if f.cause == cause), default=0)


_FINDING_SCHEMA = {
    "kind": pl.String,
    "service": pl.String,
    "name": pl.String,
    "span_kind": pl.String,
    "metric": pl.String,
    "value": pl.Float64,
    "calls": pl.UInt64,
    "median": pl.Float64,
    "scale": pl.Float64,
    "score": pl.Float64,
    "deviates": pl.Boolean,
    "seasonal": pl.Boolean,
    "baseline_start_ns": pl.Int64,
    "baseline_end_ns": pl.Int64,
    "example_trace_ids": pl.List(pl.String),
}


def _named(row: dict[str, Any]) -> tuple[str, str, str]:
    """A series row's service, name and metric, for logs."""
    return row["service"], row["name"], row["metric"]
