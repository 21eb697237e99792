"""The anomaly loop: every ``interval_s`` the incident lifecycle (:mod:`incidents.lifecycle`, fed by the query
room's scores) judges the last whole minute, and opened and resolved incidents go to Alertmanager and/or a webhook
through the same notifiers as SLO alerts (:mod:`alerts.notify`); open incidents are re-sent every ``resend_s`` so
Alertmanager keeps them firing.

An alert per incident: labels ``alertname`` (:data:`ALERT_NAME`), ``tenant``, ``incident_id``, ``service``,
``series`` (the primary series' operation or stage), ``metric``, ``severity`` (``critical`` when a new diagnosis
finding of the window is critical, else ``warning``); annotations ``summary``, ``description`` (every deviating
series against its baseline), ``diagnosis`` and ``diagnosis_remedy`` (the top new finding, else the top one),
``neighbours``, ``traces`` and ``example_trace_ids``, ``dashboard`` (the incident in the UI).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from alerts.notify import Notifier, rfc3339, send_to_all
from analysis.periodic import PeriodicWorker
from incidents.lifecycle import AnomalyDetector
from query.incident_text import incident_summary, series_text
from query.store import Incident, IncidentQuery, IncidentStore
from units import NS_PER_S

log = logging.getLogger(__name__)

ALERT_NAME = "HotspanAnomaly"


class AnomalyLoop:
    """Runs the detector and notifies receivers of incident changes.

    Args:
        detector: the incident lifecycle.
        incidents: where it keeps incidents (read for re-sends).
        notifiers: receivers (may be empty: incidents are still detected and stored).
        interval_s: seconds between evaluations.
        resend_s: seconds between re-sends of an open incident to Alertmanager.
        external_url: Hotspan's base URL, for links.
        clock: ns since the epoch.

    Thread safety: :meth:`run_once` calls are serialised; :meth:`start`/:meth:`stop` manage one daemon thread.
    """

    def __init__(
        self,
        detector: AnomalyDetector,
        incidents: IncidentStore,
        notifiers: Sequence[Notifier],
        *,
        interval_s: float,
        external_url: str,
        resend_s: float = 60.0,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.detector = detector
        self._incidents = incidents
        self._notifiers = list(notifiers)
        self.interval_s = interval_s
        self._resend_s = resend_s
        self._base = external_url.rstrip("/")
        self._clock = clock
        self._lock = threading.Lock()
        self._last_resend_ns = 0
        self._unsent: list[dict[str, Any]] = []
        # A storage outage or a receiver down fails one round: logged, tried again next interval.
        self._worker = PeriodicWorker(
            self.run_once,
            lambda: self.interval_s,
            name="hotspan-anomaly",
            log=log,
            failure="anomaly detection failed; retrying in %.1f s",
        )

    def start(self) -> None:
        """Evaluate now and every ``interval_s`` on a daemon thread."""
        self._worker.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread after its current round."""
        self._worker.stop(timeout_s)

    def run_once(self, now_ns: int | None = None) -> list[dict[str, Any]]:
        """One round judging the window before ``now_ns`` (default the clock): detect, send opened and resolved
        incidents (and earlier changes that failed to go), re-send open ones when ``resend_s`` has passed. Returns
        the alerts sent (Alertmanager postable alerts).

        Raises:
            Exception: storage failed (nothing sent). A receiver failing is logged; the changes go again next round.
        """
        with self._lock:
            # Alerts carry the clock's time (Alertmanager compares endsAt with its own); ``now_ns`` may judge
            # another moment's window (tests replaying stored history).
            now = self._clock()
            evaluation = self.detector.judge(now if now_ns is None else now_ns)
            changes = evaluation.changes
            log.debug(
                "anomaly round: %d tenant(s), %d diagnosis(es), %d root service(s) that moved diagnosed",
                len(evaluation.diagnosed),
                evaluation.diagnoses,
                sum(len(roots) for roots in evaluation.diagnosed.values()),
            )
            changed = self._unsent + [
                self.alert(c.incident, now) for c in changes if c.change in ("opened", "resolved")
            ]
            resend: list[dict[str, Any]] = []
            if now - self._last_resend_ns >= self._resend_s * NS_PER_S:
                fresh = {c.incident.incident_id for c in changes}
                still = self._incidents.incidents(IncidentQuery(status="open", limit=10_000), tenant=None)
                resend = [self.alert(i, now) for i in still if i.incident_id not in fresh]
                self._last_resend_ns = now
            ok = send_to_all(self._notifiers, changed, changed=True)
            self._unsent = [] if ok else changed
            send_to_all(self._notifiers, resend, changed=False)
            return changed + resend

    def alert(self, incident: Incident, now_ns: int) -> dict[str, Any]:
        """The Alertmanager postable alert of ``incident`` (module docstring); a resolved one ends at its
        resolution, an open one ``4 × max(interval, resend)`` from ``now_ns`` (re-sends move it on)."""
        top = next((f for f in incident.findings if f["new"]), incident.findings[0] if incident.findings else None)
        critical = any(f["new"] and f["severity"] == "critical" for f in incident.findings)
        labels = {
            "alertname": ALERT_NAME,
            "tenant": incident.tenant,
            "incident_id": incident.incident_id,
            "service": incident.service,
            "series": incident.name,
            "metric": incident.metric,
            "severity": "critical" if critical else "warning",
        }
        annotations = {
            "summary": incident_summary(incident),
            "description": "; ".join(series_text(s) for s in incident.series),
            "neighbours": ", ".join(incident.neighbours),
            "dashboard": f"{self._base}/ui/incidents?incident={incident.incident_id}",
        }
        if top is not None:
            annotations["diagnosis"] = f"{top['title']} [{top['cause']}, {top['severity']}]"
            annotations["diagnosis_remedy"] = top["remedy"]
        if incident.example_trace_ids:
            annotations["traces"] = f"{self._base}/ui/trace/{incident.example_trace_ids[0]}"
            annotations["example_trace_ids"] = ",".join(incident.example_trace_ids)
        hold_ns = int(4 * max(self.interval_s, self._resend_s) * NS_PER_S)
        ends = incident.resolved_at_ns if incident.resolved_at_ns is not None else now_ns + hold_ns
        return {
            "labels": labels,
            "annotations": annotations,
            "startsAt": rfc3339(incident.window_start_ns),
            "endsAt": rfc3339(min(ends, now_ns) if incident.status == "resolved" else ends),
            "generatorURL": annotations["dashboard"],
        }
