"""Generated Prometheus rules (alerts.rules): the PromQL per objective, units, label escaping, and the workbook's
multi-window conditions; ``promtool`` checks them (here and against the real Prometheus in
test_alerts_prometheus)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from prometheus_support import binary

from alerts.config import parse_alerts_config
from alerts.rules import bad_ratio_expr, le_matcher, promql_string, render_rules, rule_groups

CONFIG = parse_alerts_config(
    {
        "tenant": "acme",
        "external_url": "https://hotspan.example",
        "slos": [
            {
                "name": "chat",
                "service": "gateway",
                "operation": 'POST "/v1"',
                "latency": {"percentile": 99, "threshold_ms": 1400},
            },
            {"name": "errors", "service": "gateway", "span_kind": "any", "errors": {"max_ratio": 0.001}},
            {
                "name": "queue",
                "service": "gateway",
                "stage": "llm.queue",
                "latency": {"percentile": 90, "threshold_ms": 50},
            },
        ],
    }
)


def test_bad_ratio_per_objective_and_unit() -> None:
    chat, errors, queue = CONFIG.slos
    assert bad_ratio_expr(chat, "5m") == (
        '1 - (sum(rate(traces_span_metrics_duration_milliseconds_bucket{service_name="gateway", '
        'span_name="POST \\"/v1\\"", span_kind="SPAN_KIND_SERVER", le=~"1400|1400\\\\.0"}[5m])) / '
        'sum(rate(traces_span_metrics_duration_milliseconds_count{service_name="gateway", '
        'span_name="POST \\"/v1\\"", span_kind="SPAN_KIND_SERVER"}[5m])))'
    )
    assert bad_ratio_expr(errors, "1h") == (
        '(sum(rate(traces_span_metrics_calls_total{service_name="gateway", status_code="STATUS_CODE_ERROR"}[1h]))'
        ' or vector(0)) / sum(rate(traces_span_metrics_calls_total{service_name="gateway"}[1h]))'
    )
    # Stage times are exposed in seconds: 50 ms is the 0.05 bucket.
    assert 'hotspan_stage_duration_seconds_bucket{service="gateway", stage="llm.queue", le=~"0\\\\.05"}' in (
        bad_ratio_expr(queue, "6h")
    )


def test_helpers() -> None:
    assert le_matcher(800) == 'le=~"800|800\\\\.0"'
    assert le_matcher(0.4) == 'le=~"0\\\\.4"'
    assert promql_string('a"b\\c') == '"a\\"b\\\\c"'


def test_one_recording_rule_per_window_and_one_alert_per_severity() -> None:
    rules = rule_groups(CONFIG)["groups"][0]["rules"]
    recorded = [r["record"] for r in rules if "record" in r and r["labels"]["slo"] == "chat"]
    assert recorded == [f"hotspan_slo:bad_ratio:rate{w}" for w in ("5m", "30m", "1h", "6h", "3d")]
    alerts = [r for r in rules if r.get("alert") and r["labels"]["slo"] == "chat"]
    assert [a["labels"]["severity"] for a in alerts] == ["page", "ticket"]
    page = alerts[0]
    # Budget 1 %: 14.4 x 1 % over 1 h and 5 m, or 6 x 1 % over 6 h and 30 m (the workbook's page conditions).
    assert page["expr"] == (
        '(hotspan_slo:bad_ratio:rate1h{slo="chat"} > 0.144 and hotspan_slo:bad_ratio:rate5m{slo="chat"} > 0.144)'
        '\n  or\n(hotspan_slo:bad_ratio:rate6h{slo="chat"} > 0.06 and hotspan_slo:bad_ratio:rate30m{slo="chat"} > 0.06)'
    )
    assert page["labels"] == {
        "slo": "chat",
        "service": "gateway",
        "operation": 'POST "/v1"',
        "severity": "page",
        "tenant": "acme",
    }
    assert (
        page["annotations"]["summary"] == 'gateway POST "/v1": SLO p99 < 1400 ms is burning its error budget too fast'
    )
    assert page["annotations"]["traces"].startswith("https://hotspan.example/api/v1/traces?service=gateway")


def test_rendered_file_reads_back_and_passes_promtool(tmp_path: Path) -> None:
    text = render_rules(CONFIG)
    assert "&id" not in text  # no YAML anchors: people read these files
    assert yaml.safe_load(text) == rule_groups(CONFIG)
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run([binary("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
