"""The incident lifecycle: each evaluation takes the query room's scores of a window (:mod:`query.anomaly`, read
only) and decides what becomes of incidents (opened, followed, resolved), then writes the changed ones
(:mod:`storage.incident_store`); :mod:`incidents.loop` runs it and notifies. One process runs it (the role that
owns it, :mod:`hotspan.roles`), not every query node.

**Incidents.** Deviating series of one evaluation are grouped by the connected part of the window's service graph
their service sits in (one fault in an agent stack moves several services' series: one incident, not five). A group
whose services meet an open incident's joins it; any other opens an incident, whose ID is derived from the tenant,
the group and the window, so evaluating the same window again never duplicates it. An open incident keeps the
baselines it was opened against (a trailing baseline would slowly learn the fault as normal), adds the causes each
later window it deviates in finds new against that baseline to its findings, and resolves in the first window where
none of its series scores above ``close_z`` (hysteresis: half the opening limit by default) and at least one could
be judged.

**Cost.** An evaluation reads every tenant's series in a few queries (the baseline minutes read before and settled
since are kept, :mod:`query.anomaly_minutes`), scores them a tenant at a time and diagnoses only the root services that
moved (:meth:`query.anomaly.AnomalyScorer.moved`); :meth:`AnomalyDetector.judge` says which and how many
diagnoses it made (:class:`Evaluation`): those bound its time.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import polars as pl

from diagnosis import DiagnosisReport
from query.anomaly import KEYS, AnomalyScorer, AnomalySettings, AnomalyWindow, TenantSeries
from query.diagnosis import DiagnosisService
from query.topology import connected_parts, neighbours
from storage.incident_store import Incident, IncidentQuery, IncidentStore
from storage.reader import TraceReader
from storage.rollup_reader import RollupReader

Change = Literal["opened", "updated", "resolved"]


@dataclass(frozen=True)
class IncidentChange:
    """One incident version the detector wrote, and what happened: ``opened``, ``updated`` (more series deviated,
    or its series still deviate in a later window) or ``resolved``."""

    incident: Incident
    change: Change


@dataclass(frozen=True)
class Evaluation:
    """What one :meth:`AnomalyDetector.judge` did.

    Attributes:
        changes: the incident versions written.
        diagnosed: per tenant judged, the root services whose window was diagnosed (those that moved,
            :meth:`query.anomaly.AnomalyScorer.moved`), sorted.
        diagnoses: diagnoses made in all (windows, their baselines, open incidents' findings): what bounds an
            evaluation's time.
    """

    changes: list[IncidentChange]
    diagnosed: dict[str, list[str]]
    diagnoses: int


class AnomalyDetector:
    """Evaluates every active tenant's series and writes incident changes.

    Args:
        store: the incidents (:class:`storage.incident_store.IncidentStore`), read for open ones and written; its
            series feed the scorer.
        reader: traces, for examples (the query room's store).
        rollups: the service-graph rollup, for neighbours and grouping (the query room's store).
        diagnosis: the query room's diagnosis (the same rules the API, the UI and the SLO alerts use).
        settings: the scorer's knobs (:class:`query.anomaly.AnomalySettings`).
        clock: ns since the epoch.

    Thread safety: :meth:`evaluate` calls are serialised.
    """

    def __init__(
        self,
        store: IncidentStore,
        reader: TraceReader,
        rollups: RollupReader,
        diagnosis: DiagnosisService,
        settings: AnomalySettings | None = None,
        *,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._store = store
        self.scorer = AnomalyScorer(store, reader, rollups, diagnosis, settings)
        self._clock = clock
        self._lock = threading.Lock()
        self._judged: dict[str, int] = {}

    @property
    def settings(self) -> AnomalySettings:
        """The scorer's knobs; set to judge with others."""
        return self.scorer.settings

    @settings.setter
    def settings(self, settings: AnomalySettings) -> None:
        self.scorer.settings = settings

    def evaluate(self, now_ns: int | None = None) -> list[IncidentChange]:
        """The incident changes of :meth:`judge`."""
        return self.judge(now_ns).changes

    def judge(self, now_ns: int | None = None) -> Evaluation:
        """Judge the window ending ``settle_s`` before ``now_ns`` (default the clock) for every tenant with spans
        in it or an open incident, write the changed incidents, return them with what was diagnosed. A tenant whose
        window was judged already is skipped. Raises what storage raises (nothing is written then)."""
        with self._lock:
            window = self.scorer.window(self._clock() if now_ns is None else now_ns)
            open_incidents = self._store.incidents(IncidentQuery(status="open", limit=10_000), tenant=None)
            self.scorer.keep_baselines(open_incidents)
            tenants = set(self._store.active_tenants(window.start_ns, window.end_ns))
            tenants |= {incident.tenant for incident in open_incidents}
            changes: list[IncidentChange] = []
            diagnosed: dict[str, list[str]] = {}
            diagnoses = self.scorer.diagnoses
            judged = [tenant for tenant in sorted(tenants) if self._judged.get(tenant) != window.end_ns]
            series = self.scorer.series(window, judged) if judged else {}
            for tenant in judged:
                mine = [incident for incident in open_incidents if incident.tenant == tenant]
                tenant_changes, reports = self._evaluate_tenant(
                    tenant, window, series[tenant], mine, version=max(self._clock(), window.end_ns)
                )
                changes += tenant_changes
                diagnosed[tenant] = sorted(reports)
            self._store.write([change.incident for change in changes])
            # Only once written: a failed round judges the same window again next time.
            self._judged |= dict.fromkeys(judged, window.end_ns)
            return Evaluation(changes, diagnosed, self.scorer.diagnoses - diagnoses)

    def _evaluate_tenant(
        self,
        tenant: str,
        window: AnomalyWindow,
        series: TenantSeries,
        open_incidents: list[Incident],
        *,
        version: int,
    ) -> tuple[list[IncidentChange], dict[str, DiagnosisReport]]:
        """The tenant's incident changes (its ``series`` of the window scored), and the window's diagnoses of the root
        services that moved."""
        observed = series.observed
        scored = self.scorer.scored(series, window)
        moved = self.scorer.moved(series, scored, open_incidents)
        reports = self.scorer.root_diagnoses(tenant, observed, window, moved)
        changes: dict[str, IncidentChange] = {}
        current: dict[str, Incident] = {}
        for incident in open_incidents:
            change = self._follow(incident, observed, reports, window, version)
            if change is not None:
                changes[incident.incident_id] = change
            if change is None or change.change != "resolved":
                current[incident.incident_id] = incident if change is None else change.incident
        followed = pl.DataFrame(
            [{key: s[key] for key in KEYS} for i in current.values() for s in i.series],
            schema=dict.fromkeys(KEYS, pl.String),
        )
        fresh = scored.filter(pl.col("deviates")).join(followed, on=KEYS, how="anti")
        fresh = self.scorer.confirmed(tenant, fresh, window)
        findings = self.scorer.new_findings(tenant, reports, window).join(followed, on=KEYS, how="anti")
        fresh = pl.concat([fresh, findings], how="diagonal_relaxed")
        if fresh.height == 0:
            return self._renamed(changes, window, reports), reports
        topology = self.scorer.topology(tenant, window)
        component = connected_parts(topology.edges)
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in fresh.sort("score", descending=True).iter_rows(named=True):
            groups.setdefault(component.get(row["service"], row["service"]), []).append(row)
        for key, rows in groups.items():
            target = next((i for i in current.values() if any(component.get(s, s) == key for s in i.services)), None)
            if target is None:
                incident_id = _incident_id(tenant, key, window)
                if self._store.incidents(IncidentQuery(incident_id=incident_id, limit=1), tenant=tenant):
                    continue  # this window was judged before (a restart): its incident stands as it is
                opened = self._open(tenant, incident_id, rows, window, topology.edges, reports, version)
                changes[opened.incident_id] = IncidentChange(opened, "opened")
                current[opened.incident_id] = opened
            else:
                joined = self._join(target, rows, window, version)
                changes[joined.incident_id] = IncidentChange(joined, "updated")
                current[joined.incident_id] = joined
        return self._renamed(changes, window, reports), reports

    def _renamed(
        self, changes: dict[str, IncidentChange], window: AnomalyWindow, reports: dict[str, DiagnosisReport]
    ) -> list[IncidentChange]:
        """``changes`` with each updated incident's findings completed by this window's against the baseline it
        opened with (:func:`merge_findings`): a fault that starts late in the window that opens its incident
        fills the next one, and its cause can show only there (on the stack, a tokenizer reloaded per request
        is a warning once most calls after a worker's first reload, not while a clean stack still serves
        beside it), as can a second fault arriving while the incident is open."""
        renamed = []
        for change in changes.values():
            incident = change.incident
            if change.change == "updated":
                stages = {s["name"] for s in incident.series if s["kind"] == "stage"}
                now = self.scorer.findings(
                    incident.tenant,
                    incident.service,
                    window,
                    incident.baseline_start_ns,
                    incident.baseline_end_ns,
                    stages,
                    reports.get(incident.service),
                )
                incident = replace(incident, findings=merge_findings(incident.findings, now))
            renamed.append(IncidentChange(incident, change.change))
        return renamed

    def _follow(
        self,
        incident: Incident,
        observed: pl.DataFrame,
        reports: dict[str, DiagnosisReport],
        window: AnomalyWindow,
        version: int,
    ) -> IncidentChange | None:
        """An open incident in this window: resolved when none of its series is above ``close_z`` against the
        baseline it opened with and none of its findings is still ``warning`` or worse (and one could be judged),
        updated when one still deviates, else unchanged."""
        deviates = self.scorer.deviations(incident, observed, reports)
        if not deviates:
            return None
        if any(deviates):
            if incident.last_deviation_end_ns >= window.end_ns:
                return None
            updated = replace(incident, last_deviation_end_ns=window.end_ns, version=version)
            return IncidentChange(updated, "updated")
        resolved = replace(incident, status="resolved", resolved_at_ns=window.end_ns, version=version)
        return IncidentChange(resolved, "resolved")

    def _join(self, incident: Incident, rows: list[dict[str, Any]], window: AnomalyWindow, version: int) -> Incident:
        series = incident.series + [_series(row) for row in rows]
        services = sorted(set(incident.services) | {row["service"] for row in rows})
        return replace(incident, series=series, services=services, last_deviation_end_ns=window.end_ns, version=version)

    def _open(
        self,
        tenant: str,
        incident_id: str,
        rows: list[dict[str, Any]],
        window: AnomalyWindow,
        edges: pl.DataFrame,
        reports: dict[str, DiagnosisReport],
        version: int,
    ) -> Incident:
        top = rows[0]
        baseline_start, baseline_end = int(top["baseline_start_ns"]), int(top["baseline_end_ns"])
        stages = {row["name"] for row in rows if row["kind"] == "stage"}
        findings = self.scorer.findings(
            tenant, top["service"], window, baseline_start, baseline_end, stages, reports.get(top["service"])
        )
        return Incident(
            tenant=tenant,
            incident_id=incident_id,
            status="open",
            window_start_ns=window.start_ns,
            window_end_ns=window.end_ns,
            baseline_start_ns=baseline_start,
            baseline_end_ns=baseline_end,
            seasonal=bool(top["seasonal"]),
            kind=top["kind"],
            service=top["service"],
            name=top["name"],
            span_kind=top["span_kind"],
            metric=top["metric"],
            baseline_value=float(top["median"]),
            observed_value=float(top["value"]),
            score=float(top["score"]),
            services=sorted({row["service"] for row in rows}),
            series=[_series(row) for row in rows],
            findings=findings,
            neighbours=neighbours(edges, top["service"]),
            example_trace_ids=self.scorer.examples(tenant, top, window),
            last_deviation_end_ns=window.end_ns,
            version=version,
        )


def merge_findings(named: list[dict[str, Any]], later: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An open incident's findings ``named`` (:func:`compare_findings`'s dicts) completed by a later window's
    ``later``: a cause new there and not new in ``named`` is added, or replaces its entry that was not new; what
    ``named`` has stays (an incident's explanation only grows while it is open). New ones first. Pure."""
    named_new = {f["cause"] for f in named if f["new"]}
    added = [f for f in later if f["new"] and f["cause"] not in named_new]
    replaced = {f["cause"] for f in added}
    kept = [f for f in named if f["cause"] not in replaced]
    return [f for f in kept if f["new"]] + added + [f for f in kept if not f["new"]]


def _incident_id(tenant: str, group: str, window: AnomalyWindow) -> str:
    """The ID of the incident a group of series opens in a window: the same whenever that window is judged."""
    return hashlib.sha256(f"{tenant}\0{group}\0{window.start_ns}".encode()).hexdigest()[:32]


def _series(row: dict[str, Any]) -> dict[str, Any]:
    """A deviating series as an incident keeps it: keys, observed value, its baseline (median and floored
    scale, kept to judge recovery), score, calls, whether the baseline was seasonal."""
    return {key: row[key] for key in KEYS} | {
        "observed": float(row["value"]),
        "baseline": float(row["median"]),
        "baseline_scale": float(row["scale"]),
        "score": float(row["score"]),
        "calls": int(row["calls"]),
        "seasonal": bool(row["seasonal"]),
    }
