"""Prometheus alerting rules for an SLO file: multi-window, multi-burn-rate alerts (The Site Reliability
Workbook, ch. 5 "Alerting on SLOs", https://sre.google/workbook/alerting-on-slos/) over the metrics Hotspan
exposes on ``/metrics`` (:mod:`processors.pipeline.trace_metrics`), or that an OTel Collector's spanmetrics
connector produces under the same names.

Per SLO, one recording rule per distinct window gives the *bad-request ratio* over that window:

- errors: ``rate(traces_span_metrics_calls_total{..., status_code="STATUS_CODE_ERROR"}) / rate(..._calls_total)``
- latency: ``1 - rate(traces_span_metrics_duration_milliseconds_bucket{..., le="<threshold>"}) / rate(..._count)``
- stage latency: the same over ``hotspan_stage_duration_seconds`` (seconds; label ``service`` is the root service)

recorded as ``hotspan_slo:bad_ratio:rate<window>{slo, service, operation|stage}``. Per SLO and severity, one
alert ``HotspanSLOBurnRate`` fires when, for any of that severity's windows, the ratio exceeds
``burn_rate × budget`` over both the long and the short window. The built-in evaluator
(:mod:`alerts.evaluator`) computes the same ratios from ClickHouse and sends alerts with the same name and
labels, so Alertmanager merges the two paths.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

import yaml

from alerts.config import AlertsConfig, BurnWindow, Slo, duration_s

ALERT_NAME = "HotspanSLOBurnRate"
RECORD = "hotspan_slo:bad_ratio:rate{window}"
"""Recording rule name per window (e.g. ``hotspan_slo:bad_ratio:rate5m``)."""
GROUP_NAME = "hotspan-slo-burn-rate"


def promql_string(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _matchers(pairs: Iterable[tuple[str, str]]) -> str:
    return ", ".join(f"{name}={promql_string(value)}" for name, value in pairs)


def le_matcher(bound: float) -> str:
    """A matcher for one histogram bound that accepts both spellings clients print (``800`` and ``800.0``)."""
    text = repr(float(bound))
    spellings = {text, text.removesuffix(".0")}
    pattern = "|".join(sorted(spelling.replace(".", "\\\\.") for spelling in spellings))
    return f'le=~"{pattern}"'


def span_selector(slo: Slo) -> list[tuple[str, str]]:
    """Span-metric label matchers of ``slo`` (connector spellings: ``SPAN_KIND_SERVER``)."""
    pairs = [("service_name", slo.service)]
    if slo.operation is not None:
        pairs.append(("span_name", slo.operation))
    if slo.span_kind != "any":
        pairs.append(("span_kind", "SPAN_KIND_" + slo.span_kind.upper()))
    return pairs


def bad_ratio_expr(slo: Slo, window: str) -> str:
    """PromQL of the share of ``slo``'s requests that were bad over ``window`` (e.g. ``5m``); no result (or NaN)
    without traffic, so an idle service never alerts."""
    if slo.stage is not None:
        assert slo.latency is not None
        selector = _matchers([("service", slo.service), ("stage", slo.stage)])
        fast = f"hotspan_stage_duration_seconds_bucket{{{selector}, {le_matcher(slo.latency.threshold_ms / 1000)}}}"
        total = f"hotspan_stage_duration_seconds_count{{{selector}}}"
        return f"1 - (sum(rate({fast}[{window}])) / sum(rate({total}[{window}])))"
    selector = _matchers(span_selector(slo))
    if slo.errors is not None:
        failed = f'traces_span_metrics_calls_total{{{selector}, status_code="STATUS_CODE_ERROR"}}'
        calls = f"traces_span_metrics_calls_total{{{selector}}}"
        return f"(sum(rate({failed}[{window}])) or vector(0)) / sum(rate({calls}[{window}]))"
    assert slo.latency is not None
    fast = f"traces_span_metrics_duration_milliseconds_bucket{{{selector}, {le_matcher(slo.latency.threshold_ms)}}}"
    total = f"traces_span_metrics_duration_milliseconds_count{{{selector}}}"
    return f"1 - (sum(rate({fast}[{window}])) / sum(rate({total}[{window}])))"


def alert_labels(config: AlertsConfig, slo: Slo, severity: str) -> dict[str, str]:
    """Labels of an SLO's alert, the same from the rules and from the built-in evaluator: ``alertname``,
    ``slo``, ``service``, ``operation`` or ``stage`` (when set), ``severity``, ``tenant``, plus the SLO's own."""
    return {
        "alertname": ALERT_NAME,
        "slo": slo.name,
        **slo.selector_labels(),
        "severity": severity,
        "tenant": config.tenant,
        **slo.labels,
    }


def objective_text(slo: Slo) -> str:
    """The objective in words, e.g. ``p95 < 800 ms`` or ``error ratio < 1%``."""
    if slo.latency is not None:
        return f"p{slo.latency.percentile:g} < {slo.latency.threshold_ms:g} ms"
    assert slo.errors is not None
    return f"error ratio < {slo.errors.max_ratio:.3%}".replace(".000%", "%")


def subject_text(slo: Slo) -> str:
    """What the SLO is about, e.g. ``gateway POST /chat`` or ``gateway stage llm.queue``."""
    if slo.stage is not None:
        return f"{slo.service} stage {slo.stage}"
    return f"{slo.service} {slo.operation}" if slo.operation else slo.service


def traces_link(config: AlertsConfig, slo: Slo) -> str:
    """A link to example traces of ``slo``'s bad requests (Hotspan's trace search API)."""
    query: dict[str, str] = {"service": slo.service, "limit": "20"}
    if slo.operation is not None:
        query["operation"] = slo.operation
    if slo.latency is not None and slo.stage is None:
        query["min_duration_ms"] = f"{slo.latency.threshold_ms:g}"
    return f"{config.external_url.rstrip('/')}/api/v1/traces?{urlencode(query)}"


def rule_groups(config: AlertsConfig) -> dict[str, Any]:
    """The rules file as a mapping (``{"groups": [...]}``), ready for YAML."""
    recording: list[dict[str, Any]] = []
    alerting: list[dict[str, Any]] = []
    for slo in config.slos:
        windows = config.windows_of(slo)
        selector = {"slo": slo.name, **slo.selector_labels()}
        for window in sorted({w for pair in windows for w in (pair.long, pair.short)}, key=duration_s):
            recording.append(
                {"record": RECORD.format(window=window), "expr": bad_ratio_expr(slo, window), "labels": selector}
            )
        for severity in dict.fromkeys(pair.severity for pair in windows):
            pairs = [pair for pair in windows if pair.severity == severity]
            alerting.append(_alert_rule(config, slo, severity, pairs))
    return {"groups": [{"name": GROUP_NAME, "rules": recording + alerting}]}


def _alert_rule(config: AlertsConfig, slo: Slo, severity: str, pairs: list[BurnWindow]) -> dict[str, Any]:
    matcher = f"{{slo={promql_string(slo.name)}}}"
    conditions = [
        f"({RECORD.format(window=p.long)}{matcher} > {p.burn_rate * slo.budget:.6g}"
        f" and {RECORD.format(window=p.short)}{matcher} > {p.burn_rate * slo.budget:.6g})"
        for p in pairs
    ]
    windows = ", ".join(f"{p.long}/{p.short} at {p.burn_rate:g}x" for p in pairs)
    summary = slo.summary or f"{subject_text(slo)}: SLO {objective_text(slo)} is burning its error budget too fast"
    return {
        "alert": ALERT_NAME,
        "expr": "\n  or\n".join(conditions),
        "labels": {k: v for k, v in alert_labels(config, slo, severity).items() if k != "alertname"},
        "annotations": {
            "summary": summary,
            "description": (
                f"Bad-request ratio {{{{ $value | humanizePercentage }}}} (budget {slo.budget:.3%}) burns faster"
                f" than allowed over both windows of one of: {windows}."
            ),
            "traces": traces_link(config, slo),
            "dashboard": f"{config.external_url.rstrip('/')}/ui/services",
        },
    }


def render_rules(config: AlertsConfig) -> str:
    """The rules file text (YAML), as ``promtool check rules`` and Prometheus' ``rule_files`` read it."""
    header = (
        "# Generated by `hotspan alerts rules` from an SLO file: multi-window, multi-burn-rate alerts\n"
        "# (SRE workbook, ch. 5 'Alerting on SLOs'). Edit the SLO file, not this one.\n"
    )
    text = yaml.dump(rule_groups(config), Dumper=_NoAliases, sort_keys=False, allow_unicode=True, width=1_000_000)
    return header + text


class _NoAliases(yaml.SafeDumper):
    """A safe dumper that writes repeated label maps out in full (no ``&id001`` anchors: people read rules)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """Multi-line strings (alert expressions with ``or``) as literal blocks, the way people write them."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_NoAliases.add_representer(str, _represent_text)
