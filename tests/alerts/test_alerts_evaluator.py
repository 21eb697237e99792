"""The built-in evaluator (alerts.evaluator) on a stand-in store and clock: when alerts fire, re-send and resolve,
what they carry, and the webhook payload (alerts.notify) as a receiver sees it."""

from __future__ import annotations

import time
from typing import Any

from prometheus_support import WebhookReceiver, wait_until

from alerts.config import parse_alerts_config
from alerts.evaluator import SloEvaluator, diagnosis_annotations
from alerts.notify import NotifyError, WebhookNotifier, fingerprint, rfc3339, webhook_payload
from diagnosis import DiagnosisReport, Finding
from storage.rollup_reader import RedCounts, RedSelection

S = 1_000_000_000
NOW = 1_790_000_000 * S
CONFIG = parse_alerts_config(
    {
        "external_url": "https://hotspan.example",
        "interval_s": 10,
        "resend_s": 60,
        "windows": [
            {"long": "1h", "short": "5m", "burn_rate": 14.4, "severity": "page"},
            {"long": "3d", "short": "6h", "burn_rate": 1, "severity": "ticket"},
        ],
        "slos": [
            {"name": "chat", "service": "gw", "operation": "chat", "latency": {"percentile": 95, "threshold_ms": 800}},
            {
                "name": "queue",
                "service": "gw",
                "stage": "llm.queue",
                "latency": {"percentile": 95, "threshold_ms": 400},
            },
        ],
    }
)


class Store:
    """Counts per window length (seconds); ``slow`` spans sit in the +Inf bucket, the rest under 800 ms."""

    def __init__(self) -> None:
        self.windows: dict[int, tuple[int, int]] = {}
        self.stage: tuple[int, int] = (0, 0)
        self.selections: list[RedSelection] = []

    def red_counts(self, selection: RedSelection, start_ns: int, end_ns: int, *, tenant: str | None) -> RedCounts:
        assert tenant == "default"
        self.selections.append(selection)
        calls, slow = self.windows.get((end_ns - start_ns) // S, (0, 0))
        return RedCounts(calls, 0, {800.0: calls - slow, float("inf"): slow})

    def stage_counts(
        self, service: str, stage: str, threshold_ns: int, *_window: int, tenant: str | None
    ) -> tuple[int, int]:
        assert (service, stage, threshold_ns) == ("gw", "llm.queue", 400_000_000)
        return self.stage

    def trace_ids(self, query: Any, *, tenant: str | None) -> list[str]:
        assert query.min_duration_ns == 800_000_000 and query.operation == "chat" and query.span_kind == "Server"
        return ["a" * 32, "b" * 32]


class Sent:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[list[dict], bool]] = []
        self.fail = fail

    def send(self, alerts: list[dict], *, changed: bool) -> None:
        if self.fail:
            raise NotifyError("down")
        if alerts:
            self.calls.append((list(alerts), changed))


def evaluator(store: Store, sent: Sent) -> SloEvaluator:
    diagnose = lambda *_args: {"diagnosis": "Scheduler queue saturated [queue_saturation, critical]"}  # noqa: E731
    return SloEvaluator(CONFIG, store, [sent], clock=lambda: NOW, diagnose=diagnose)  # type: ignore[arg-type]


def test_fires_when_both_windows_burn_then_resends_then_resolves() -> None:
    store, sent = Store(), Sent()
    slo = evaluator(store, sent)
    store.windows = {3600: (1000, 100), 300: (100, 20)}  # 10 % and 20 % slow: 14.4 x 5 % = 72 % not reached
    assert slo.run_once() == []
    store.windows = {3600: (1000, 800), 300: (100, 90), 259200: (10_000, 900), 21600: (2000, 150)}
    fired = slo.run_once()
    assert [a["labels"]["severity"] for a in fired] == ["page", "ticket"]
    page = fired[0]
    assert page["labels"] == {
        "alertname": "HotspanSLOBurnRate",
        "slo": "chat",
        "service": "gw",
        "operation": "chat",
        "severity": "page",
        "tenant": "default",
    }
    assert (
        page["annotations"]["summary"]
        == "gw chat: SLO p95 < 800 ms burning its error budget 14.4x too fast (1h and 5m)"
    )
    assert page["annotations"]["description"].startswith("bad ratio 80.00% over 1h, 90.00% over 5m (limit 72.00%")
    assert page["annotations"]["traces"] == f"https://hotspan.example/ui/trace/{'a' * 32}"
    assert page["annotations"]["example_trace_ids"] == f"{'a' * 32},{'b' * 32}"
    assert page["annotations"]["diagnosis"].startswith("Scheduler queue saturated")
    assert page["startsAt"] == rfc3339(NOW) and page["endsAt"] == rfc3339(NOW + 4 * 60 * S)
    assert sent.calls == [(fired, True)]
    assert store.selections[0] == RedSelection("gw", "chat", "Server")

    assert slo.run_once(NOW + 30 * S) == []  # still firing, re-sent only after resend_s
    resent = slo.run_once(NOW + 61 * S)
    assert [a["labels"]["severity"] for a in resent] == ["page", "ticket"] and sent.calls[-1][1] is False
    assert resent[0]["startsAt"] == page["startsAt"]

    store.windows = {3600: (1000, 800), 300: (100, 1), 259200: (10_000, 900), 21600: (2000, 150)}
    resolved = slo.run_once(NOW + 90 * S)
    assert [a["labels"]["severity"] for a in resolved] == ["page"]  # the short window recovered
    assert resolved[0]["endsAt"] == rfc3339(NOW + 90 * S) and sent.calls[-1][1] is True
    assert [labels["severity"] for labels in slo.firing()] == ["ticket"]


def test_no_requests_never_alert_and_stage_slos_read_the_summaries() -> None:
    store, sent = Store(), Sent()
    slo = evaluator(store, sent)
    assert all(not status.firing for status in slo.evaluate())
    store.stage = (100, 90)
    firing = [s for s in slo.evaluate() if s.firing]
    assert [(s.slo.name, s.severity) for s in firing] == [("queue", "page"), ("queue", "ticket")]


def test_a_failed_delivery_is_sent_again() -> None:
    store, down = Store(), Sent(fail=True)
    slo = evaluator(store, down)
    store.windows = {3600: (10, 10), 300: (10, 10)}
    slo.run_once()
    down.fail = False
    again = slo.run_once(NOW + 10 * S)
    assert [a["labels"]["severity"] for a in again] == ["page"] and down.calls[0][1] is True
    store.windows = {}
    down.fail = True
    slo.run_once(NOW + 20 * S)  # the resolution is lost once...
    down.fail = False
    resolved = slo.run_once(NOW + 30 * S)  # ...and delivered at the next evaluation, with its own end time
    assert resolved[0]["endsAt"] == rfc3339(NOW + 20 * S)


def test_webhook_payload_has_alertmanagers_shape() -> None:
    now = time.time_ns()  # the notifier tells firing from resolved by endsAt against the real clock
    alert = {
        "labels": {"alertname": "HotspanSLOBurnRate", "slo": "chat", "severity": "page"},
        "annotations": {"summary": "s"},
        "startsAt": rfc3339(now),
        "endsAt": rfc3339(now + 240 * S),
        "generatorURL": "https://hotspan.example/ui/services",
    }
    with WebhookReceiver() as receiver:
        WebhookNotifier(receiver.url, "https://hotspan.example/ui/").send([alert], changed=True)
        WebhookNotifier(receiver.url, "https://hotspan.example/ui/").send([alert], changed=False)  # a re-send
        payload = wait_until(lambda: receiver.payloads, 5, "the webhook payload")[0]
    assert len(receiver.payloads) == 1
    assert payload["version"] == "4" and payload["status"] == "firing" and payload["receiver"] == "hotspan"
    assert payload["groupLabels"] == {"alertname": "HotspanSLOBurnRate", "slo": "chat"}
    assert payload["commonLabels"] == alert["labels"] and payload["commonAnnotations"] == {"summary": "s"}
    assert payload["externalURL"] == "https://hotspan.example/ui/"
    assert payload["alerts"][0]["fingerprint"] == fingerprint(alert["labels"]) and len(fingerprint({})) == 16
    resolved = webhook_payload([{**alert, "endsAt": rfc3339(now)}], "x", now_ns=now + S)
    assert resolved["status"] == "resolved" and resolved["alerts"][0]["status"] == "resolved"


def test_diagnosis_annotation_names_the_top_finding() -> None:
    finding = Finding(
        cause="queue_saturation",
        title="vLLM queue holds requests 40% of their time",
        severity="critical",
        confidence=0.9,
        evidence={"queue_share": 0.4},
        remedy="Add engine replicas.",
    )
    calls: list[dict] = []

    class Diagnosis:
        """The query room's diagnosis as the evaluator calls it, answering what each step sets."""

        answer: DiagnosisReport | Exception = DiagnosisReport([finding], trace_count=10)

        def diagnose(self, **kwargs: Any) -> DiagnosisReport:
            calls.append(kwargs)
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    room = Diagnosis()
    assert diagnosis_annotations(room, "acme", "gw", 1, 2) == {  # type: ignore[arg-type]
        "diagnosis": "vLLM queue holds requests 40% of their time [queue_saturation, critical]",
        "diagnosis_remedy": "Add engine replicas.",
    }
    assert calls[0] | {"limit": 0} == {"tenant": "acme", "start_ns": 1, "end_ns": 2, "service": "gw", "limit": 0}
    room.answer = DiagnosisReport([], trace_count=0)
    assert diagnosis_annotations(room, "acme", "gw", 1, 2) == {}  # type: ignore[arg-type]
    room.answer = RuntimeError("boom")
    assert diagnosis_annotations(room, "acme", "gw", 1, 2) == {}  # type: ignore[arg-type]
