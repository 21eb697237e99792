"""Delivering alerts: to Alertmanager's API v2 (``POST /api/v2/alerts``) and to a webhook in Alertmanager's
webhook payload shape (version 4), so the same receivers (PagerDuty/Opsgenie bridges, chat relays) take them.

Alert dicts follow Alertmanager's ``postableAlert``: ``labels``, ``annotations``, ``startsAt``, ``endsAt``
(RFC 3339), ``generatorURL``. A firing alert carries an ``endsAt`` in the future (Alertmanager resolves it by
itself if Hotspan stops re-sending it, as Prometheus does); a resolved one carries the resolution time.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx

log = logging.getLogger(__name__)

WEBHOOK_VERSION = "4"
RECEIVER = "hotspan"
"""``receiver`` of webhook payloads Hotspan sends itself."""


class NotifyError(RuntimeError):
    """A receiver could not be reached or refused the alerts."""


def rfc3339(unix_ns: int) -> str:
    """A Unix time in ns as RFC 3339 with ms, UTC (``2024-10-30T12:24:28.889Z``)."""
    moment = datetime.fromtimestamp(unix_ns / 1e9, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def fingerprint(labels: dict[str, str]) -> str:
    """A stable 16-hex ID of a label set (as Alertmanager's ``fingerprint`` field identifies an alert)."""
    digest = hashlib.sha256()
    for key in sorted(labels):
        digest.update(f"{key}\0{labels[key]}\0".encode())
    return digest.hexdigest()[:16]


class Notifier(Protocol):
    """Sends alert state changes. Blocking; called from the evaluator's thread."""

    def send(self, alerts: Sequence[dict[str, Any]], *, changed: bool) -> None:
        """Deliver ``alerts`` (postable alerts). ``changed``: they started or resolved now (False for a re-send
        of still-firing alerts).

        Raises:
            NotifyError: delivery failed.
        """
        ...


class AlertmanagerNotifier:
    """Posts to Alertmanager's API v2: every change, and every still-firing alert again on each re-send, so
    Alertmanager keeps it open (its ``resolve_timeout`` applies only to alerts without ``endsAt``).

    Args:
        url: Alertmanager's base URL, e.g. ``http://127.0.0.1:9093``.
        timeout_s: per request.
    """

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self._timeout_s = timeout_s

    def send(self, alerts: Sequence[dict[str, Any]], *, changed: bool) -> None:
        if not alerts:
            return
        try:
            response = httpx.post(self.url, json=list(alerts), timeout=self._timeout_s)
        except httpx.HTTPError as exc:
            raise NotifyError(f"Alertmanager {self.url}: {exc}") from exc
        if response.status_code >= 300:
            raise NotifyError(f"Alertmanager {self.url}: HTTP {response.status_code} {response.text[:200]}")


class WebhookNotifier:
    """Posts state changes (not re-sends) in Alertmanager's webhook payload shape, one payload per alert (a
    group of one), ``status`` ``firing`` or ``resolved``.

    Args:
        url: the receiver.
        external_url: the payload's ``externalURL`` (Hotspan's UI).
        timeout_s: per request.
    """

    def __init__(self, url: str, external_url: str, timeout_s: float = 10.0) -> None:
        self.url = url
        self._external_url = external_url
        self._timeout_s = timeout_s

    def send(self, alerts: Sequence[dict[str, Any]], *, changed: bool) -> None:
        if not changed:
            return
        for alert in alerts:
            try:
                response = httpx.post(
                    self.url, json=webhook_payload([alert], self._external_url), timeout=self._timeout_s
                )
            except httpx.HTTPError as exc:
                raise NotifyError(f"webhook {self.url}: {exc}") from exc
            if response.status_code >= 300:
                raise NotifyError(f"webhook {self.url}: HTTP {response.status_code}")


def build_notifiers(alertmanager_url: str | None, webhook_url: str | None, external_url: str) -> list[Notifier]:
    """Receivers for the URLs given (none for None): Alertmanager, and a webhook whose payloads name
    ``external_url``'s UI."""
    notifiers: list[Notifier] = []
    if alertmanager_url:
        notifiers.append(AlertmanagerNotifier(alertmanager_url))
    if webhook_url:
        notifiers.append(WebhookNotifier(webhook_url, f"{external_url.rstrip('/')}/ui/"))
    return notifiers


def send_to_all(notifiers: Sequence[Notifier], alerts: Sequence[dict[str, Any]], *, changed: bool) -> bool:
    """Send ``alerts`` to every notifier (see :meth:`Notifier.send`); a failing one is logged and the others still
    get them. Returns whether every notifier took them."""
    ok = True
    for notifier in notifiers:
        try:
            notifier.send(alerts, changed=changed)
        except NotifyError as exc:
            log.warning("alert delivery failed: %s", exc)
            ok = False
    return ok


def alert_status(alert: dict[str, Any], now_ns: int) -> str:
    """``resolved`` when the alert's ``endsAt`` has passed, else ``firing``."""
    ends_at = alert.get("endsAt")
    return "resolved" if ends_at and ends_at <= rfc3339(now_ns) else "firing"


def webhook_payload(alerts: Sequence[dict[str, Any]], external_url: str, now_ns: int | None = None) -> dict[str, Any]:
    """Alertmanager's webhook body (version 4) for ``alerts``: ``status``, ``receiver``, ``groupLabels``,
    ``commonLabels``, ``commonAnnotations``, ``externalURL``, ``groupKey``, ``truncatedAlerts`` and ``alerts``
    (each with ``status`` and ``fingerprint``)."""
    stamp = now_ns if now_ns is not None else int(datetime.now(tz=UTC).timestamp() * 1e9)
    items = [
        {
            "status": alert_status(alert, stamp),
            "labels": alert["labels"],
            "annotations": alert.get("annotations", {}),
            "startsAt": alert["startsAt"],
            "endsAt": alert.get("endsAt", "0001-01-01T00:00:00Z"),
            "generatorURL": alert.get("generatorURL", ""),
            "fingerprint": fingerprint(alert["labels"]),
        }
        for alert in alerts
    ]
    common_labels = _common([item["labels"] for item in items])
    group_labels = {k: v for k, v in common_labels.items() if k in ("alertname", "slo")}
    return {
        "version": WEBHOOK_VERSION,
        "groupKey": "{}:{" + ", ".join(f'{k}="{v}"' for k, v in sorted(group_labels.items())) + "}",
        "truncatedAlerts": 0,
        "status": "firing" if any(item["status"] == "firing" for item in items) else "resolved",
        "receiver": RECEIVER,
        "groupLabels": group_labels,
        "commonLabels": common_labels,
        "commonAnnotations": _common([item["annotations"] for item in items]),
        "externalURL": external_url,
        "alerts": items,
    }


def _common(maps: list[dict[str, str]]) -> dict[str, str]:
    """The key/value pairs every map shares."""
    if not maps:
        return {}
    return {k: v for k, v in maps[0].items() if all(m.get(k) == v for m in maps[1:])}
