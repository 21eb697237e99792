"""The built-in SLO evaluator: every ``interval_s`` it computes each SLO's bad-request ratio over its burn-rate
windows from ClickHouse, and sends firing and resolved alerts to Alertmanager and/or a webhook.

Same math as the generated Prometheus rules (:mod:`alerts.rules`), read from the rollups instead of metrics:

- span SLOs read ``hotspan_red_minutes`` (:meth:`storage.rollup_reader.RollupReader.red_counts`): errors / calls,
  or spans above the latency threshold (its histogram bucket counts) / calls;
- stage SLOs read the trace pipeline's ``hotspan_trace_summary`` (requests whose critical path spent more than
  the threshold in the stage / requests).

An alert (one per SLO and severity, labels from :func:`alerts.rules.alert_labels`) fires when, for any of that
severity's windows, ratio / budget exceeds the burn rate over both the long and the short window; it resolves
when none does. Windows are read at minute granularity (the rollups are per minute) and end now. A window
without requests burns nothing.

Annotations: ``summary``, ``description`` (the ratios), ``traces`` (link to the first example trace in Hotspan's
UI), ``example_trace_ids``, ``search`` (trace search API link), ``dashboard``, and, when the ``diagnosis``
package finds a cause in the short window, ``diagnosis`` (its title, cause and severity) and
``diagnosis_remedy``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from alerts.config import AlertsConfig, BurnWindow, Slo
from alerts.notify import Notifier, build_notifiers, rfc3339, send_to_all
from alerts.rules import alert_labels, objective_text, subject_text, traces_link
from analysis.periodic import PeriodicWorker
from query.diagnosis import DiagnosisService
from query.store import RedCounts, RedSelection, TraceQuery
from units import NS_PER_S

log = logging.getLogger(__name__)

EXAMPLE_TRACES = 5


class SloReads(Protocol):
    """What the evaluator reads, through the query room (:class:`query.service.QueryService` has these methods):
    the rollups for the ratios, the traces for examples."""

    def red_counts(self, selection: RedSelection, start_ns: int, end_ns: int, *, tenant: str | None) -> RedCounts: ...

    def stage_counts(
        self, service: str, stage: str, threshold_ns: int, start_ns: int, end_ns: int, *, tenant: str | None
    ) -> tuple[int, int]: ...

    def trace_ids(self, query: TraceQuery, *, tenant: str | None) -> list[str]: ...


Diagnose = Callable[[str, str, int, int], dict[str, str]]
"""``(tenant, service, start_ns, end_ns) → annotations`` naming the top diagnosed cause (empty for none)."""


@dataclass(frozen=True)
class WindowBurn:
    """One burn-rate condition evaluated: the bad ratios over its long and short windows (None: no requests)."""

    window: BurnWindow
    long_ratio: float | None
    short_ratio: float | None
    threshold: float
    """``burn_rate × budget``: a ratio above it burns too fast."""

    @property
    def burning(self) -> bool:
        return (
            self.long_ratio is not None
            and self.short_ratio is not None
            and self.long_ratio > self.threshold
            and self.short_ratio > self.threshold
        )


@dataclass(frozen=True)
class SloStatus:
    """One SLO at one severity at one evaluation."""

    slo: Slo
    severity: str
    burns: list[WindowBurn]

    @property
    def firing(self) -> bool:
        return any(burn.burning for burn in self.burns)


@dataclass
class _Active:
    """A firing alert the evaluator has sent."""

    starts_ns: int
    annotations: dict[str, str]
    last_sent_ns: int = 0
    labels: dict[str, str] = field(default_factory=dict)


class SloEvaluator:
    """Evaluates an SLO file against the store and notifies receivers of changes.

    Args:
        config: the SLO file.
        reader: the query room (:class:`SloReads`), read for ``config.tenant``.
        notifiers: receivers; default: Alertmanager and/or the webhook named in ``config``.
        clock: ns since the epoch (tests pass a fake).
        diagnose: names the top diagnosed cause for an alert's annotations (Hotspan passes
            :func:`diagnosis_annotations` over the query room's diagnosis, so an alert names the cause the API
            and the Diagnosis page name); None: alerts carry no diagnosis.

    Thread safety: :meth:`run_once` calls are serialised; :meth:`start`/:meth:`stop` manage one daemon thread.
    """

    def __init__(
        self,
        config: AlertsConfig,
        reader: SloReads,
        notifiers: Sequence[Notifier] | None = None,
        *,
        clock: Callable[[], int] = time.time_ns,
        diagnose: Diagnose | None = None,
    ) -> None:
        self.config = config
        self._reader = reader
        self._notifiers = list(notifiers) if notifiers is not None else default_notifiers(config)
        self._clock = clock
        self._diagnose = diagnose
        self._active: dict[tuple[str, str], _Active] = {}
        self._unsent_resolved: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        # A storage outage or a receiver down fails one evaluation: logged, state kept, tried again next interval.
        self._worker = PeriodicWorker(
            self.run_once,
            lambda: self.config.interval_s,
            name="hotspan-slo-evaluator",
            log=log,
            failure="SLO evaluation failed; retrying in %.1f s",
        )

    def start(self) -> None:
        """Evaluate now and every ``config.interval_s`` on a daemon thread."""
        if self._worker.running:
            return
        if not self._notifiers:
            log.warning("SLO file names no alertmanager_url or webhook_url: alerts are evaluated but sent nowhere")
        self._worker.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread after its current evaluation (firing alerts are left to expire at their ``endsAt``)."""
        self._worker.stop(timeout_s)

    def evaluate(self, now_ns: int | None = None) -> list[SloStatus]:
        """Every SLO at every severity now. Raises what storage raises."""
        now = self._clock() if now_ns is None else now_ns
        statuses = []
        for slo in self.config.slos:
            windows = self.config.windows_of(slo)
            ratios = {w: self._bad_ratio(slo, now - w * NS_PER_S, now) for w in _window_lengths(windows)}
            for severity in dict.fromkeys(w.severity for w in windows):
                burns = [
                    WindowBurn(w, ratios[w.long_s], ratios[w.short_s], w.burn_rate * slo.budget)
                    for w in windows
                    if w.severity == severity
                ]
                statuses.append(SloStatus(slo, severity, burns))
        return statuses

    def run_once(self, now_ns: int | None = None) -> list[dict[str, Any]]:
        """Evaluate and notify: alerts that started or resolved go to every receiver; still-firing ones are
        re-sent to Alertmanager every ``resend_s``. Returns the alerts sent (postable alert dicts).

        Raises:
            Exception: storage failed (nothing sent). A receiver failing is logged, and the change is sent again
            at the next evaluation.
        """
        with self._lock:
            now = self._clock() if now_ns is None else now_ns
            changed: list[dict[str, Any]] = list(self._unsent_resolved)
            resolved: list[dict[str, Any]] = []
            resend: list[dict[str, Any]] = []
            delivered: list[tuple[str, str]] = []
            for status in self.evaluate(now):
                key = (status.slo.name, status.severity)
                active = self._active.get(key)
                if status.firing and active is None:
                    labels = alert_labels(self.config, status.slo, status.severity)
                    active = _Active(now, self._annotations(status, now), labels=labels)
                    self._active[key] = active
                    changed.append(self._alert(active, now, firing=True))
                    delivered.append(key)
                elif status.firing and active is not None:
                    if active.last_sent_ns == 0:
                        changed.append(self._alert(active, now, firing=True))
                        delivered.append(key)
                    elif now - active.last_sent_ns >= self.config.resend_s * NS_PER_S:
                        resend.append(self._alert(active, now, firing=True))
                        delivered.append(key)
                elif not status.firing and active is not None:
                    resolved.append(self._alert(active, now, firing=False))
                    del self._active[key]
            changed += resolved
            ok = send_to_all(self._notifiers, changed, changed=True) and send_to_all(
                self._notifiers, resend, changed=False
            )
            # A resolution that could not be delivered is sent again next time (its endsAt stays in the past).
            self._unsent_resolved = [] if ok else [a for a in changed if a["endsAt"] <= rfc3339(now)]
            for key in delivered:
                if key in self._active:
                    # A failed delivery leaves last_sent_ns at 0 so the next evaluation sends it again.
                    self._active[key].last_sent_ns = now if ok else 0
            return changed + resend

    def firing(self) -> list[dict[str, str]]:
        """Label sets of the alerts firing now."""
        with self._lock:
            return [dict(active.labels) for active in self._active.values()]

    def _alert(self, active: _Active, now: int, *, firing: bool) -> dict[str, Any]:
        hold_ns = int(4 * max(self.config.interval_s, self.config.resend_s) * NS_PER_S)
        return {
            "labels": dict(active.labels),
            "annotations": dict(active.annotations),
            "startsAt": rfc3339(active.starts_ns),
            "endsAt": rfc3339(now + hold_ns if firing else now),
            "generatorURL": f"{self.config.external_url.rstrip('/')}/ui/services",
        }

    def _bad_ratio(self, slo: Slo, start_ns: int, end_ns: int) -> float | None:
        tenant = self.config.tenant
        if slo.stage is not None:
            assert slo.latency is not None
            threshold_ns = round(slo.latency.threshold_ms * 1_000_000)
            total, bad = self._reader.stage_counts(
                slo.service, slo.stage, threshold_ns, start_ns, end_ns, tenant=tenant
            )
        else:
            kind = None if slo.span_kind == "any" else slo.span_kind
            counts = self._reader.red_counts(
                RedSelection(slo.service, slo.operation, kind), start_ns, end_ns, tenant=tenant
            )
            total = counts.calls
            bad = counts.errors if slo.errors is not None else counts.slower_than(slo.latency.threshold_ms)  # type: ignore[union-attr]
        return bad / total if total else None

    def _annotations(self, status: SloStatus, now: int) -> dict[str, str]:
        slo = status.slo
        burning = [burn for burn in status.burns if burn.burning]
        worst = burning[0]
        start = now - worst.window.short_s * NS_PER_S
        base = self.config.external_url.rstrip("/")
        annotations = {
            "summary": slo.summary
            or (
                f"{subject_text(slo)}: SLO {objective_text(slo)} burning its error budget "
                f"{worst.window.burn_rate:g}x too fast ({worst.window.long} and {worst.window.short})"
            ),
            "description": "; ".join(
                f"bad ratio {burn.long_ratio:.2%} over {burn.window.long}, {burn.short_ratio:.2%} over "
                f"{burn.window.short} (limit {burn.threshold:.2%} = {burn.window.burn_rate:g} x budget "
                f"{slo.budget:.2%})"
                for burn in burning
            ),
            "search": traces_link(self.config, slo),
            "dashboard": f"{base}/ui/services",
        }
        examples = self._examples(slo, start, now)
        if examples:
            annotations["traces"] = f"{base}/ui/trace/{examples[0]}"
            annotations["example_trace_ids"] = ",".join(examples)
        if self._diagnose is not None:
            annotations |= self._diagnose(self.config.tenant, slo.service, start, now)
        return annotations

    def _examples(self, slo: Slo, start_ns: int, end_ns: int) -> list[str]:
        """Trace IDs of bad requests of ``slo`` in the window (slow ones for latency, failed ones for errors)."""
        query = TraceQuery(
            service=slo.service,
            operation=slo.operation,
            start_ns=start_ns,
            end_ns=end_ns,
            span_kind=None if slo.span_kind == "any" or slo.stage is not None else slo.span_kind,
            min_duration_ns=(
                round(slo.latency.threshold_ms * 1_000_000) if slo.latency is not None and slo.stage is None else None
            ),
            status_code="Error" if slo.errors is not None else None,
            limit=EXAMPLE_TRACES,
        )
        try:
            return self._reader.trace_ids(query, tenant=self.config.tenant)
        except Exception:
            log.exception("example traces for SLO %s could not be read", slo.name)
            return []


def default_notifiers(config: AlertsConfig) -> list[Notifier]:
    """Alertmanager and/or webhook receivers named in ``config``."""
    return build_notifiers(config.alertmanager_url, config.webhook_url, config.external_url)


def diagnosis_annotations(
    diagnosis: DiagnosisService, tenant: str, service: str, start_ns: int, end_ns: int
) -> dict[str, str]:
    """``diagnosis`` and ``diagnosis_remedy`` annotations from the top finding of the query room's diagnosis over
    the window's traces of ``service``; empty when it finds nothing or fails (an alert never waits on it)."""
    try:
        report = diagnosis.diagnose(tenant=tenant, start_ns=start_ns, end_ns=end_ns, service=service, limit=500)
    except Exception:
        log.exception("diagnosis for an alert on %s failed; sending the alert without it", service)
        return {}
    if not report.findings:
        return {}
    top = report.findings[0]
    return {"diagnosis": f"{top.title} [{top.cause}, {top.severity}]", "diagnosis_remedy": top.remedy}


def _window_lengths(windows: list[BurnWindow]) -> list[int]:
    return sorted({w.long_s for w in windows} | {w.short_s for w in windows})
