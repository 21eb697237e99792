"""SLO files (alerts.config): the packaged example is valid, and a bad file reports every problem at once, each
under its key; ``hotspan alerts check`` says the same on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from alerts.config import WORKBOOK_WINDOWS, AlertsConfigError, duration_s, load_alerts_config, parse_alerts_config
from hotspan.cli import main as hotspan_main

EXAMPLE = Path(__file__).resolve().parents[2] / "alerts" / "example.slo.yaml"


def test_packaged_example_is_valid() -> None:
    config = load_alerts_config(EXAMPLE)
    assert [slo.name for slo in config.slos] == ["gateway-latency", "gateway-errors", "engine-queue"]
    latency, errors, stage = config.slos
    assert latency.budget == pytest.approx(0.05) and errors.budget == 0.01 and stage.kind == "latency"
    assert config.windows == list(WORKBOOK_WINDOWS)
    assert [(w.long_s, w.short_s, w.burn_rate) for w in WORKBOOK_WINDOWS] == [
        (3600, 300, 14.4),
        (21600, 1800, 6.0),
        (259200, 21600, 1.0),
    ]


def test_every_problem_is_reported_with_its_key() -> None:
    document = {
        "tenant": "bad tenant",
        "interval_s": 0,
        "windows": [{"long": "5m", "short": "1h", "burn_rate": 2, "severity": "page"}],
        "slos": [
            {"name": "a", "service": "gw", "latency": {"percentile": 95, "threshold_ms": 750}},
            {"name": "a", "service": "gw", "errors": {"max_ratio": 2}},
            {"name": "b", "service": "gw", "stage": "warp", "latency": {"percentile": 95, "threshold_ms": 400}},
            {
                "name": "c",
                "service": "gw",
                "latency": {"percentile": 95, "threshold_ms": 800},
                "errors": {"max_ratio": 0.1},
            },
            {"name": "d", "service": "gw", "labels": {"severity": "x"}, "errors": {"max_ratio": 0.1}, "colour": 1},
        ],
    }
    with pytest.raises(AlertsConfigError) as caught:
        parse_alerts_config(document)
    message = str(caught.value)
    for expected in (
        "tenant: 1-64 letters",
        "interval_s: Input should be greater than 0",
        "windows.0: short (1h) must be shorter than long (5m)",
        "slos.0: latency.threshold_ms 750 is not a span histogram bound (ms): 2, 4, 6, 8, 10, 50, 100, 200, 400, 800",
        "slos.1.errors.max_ratio: Input should be less than 1",
        "slos.2.stage: unknown stage 'warp'",
        "slos.3: set exactly one of latency, errors",
        "slos.4.labels: label names must be Prometheus names other than",
        "slos.4.colour: Extra inputs are not permitted",
    ):
        assert expected in message, expected


def test_duplicate_names_and_durations() -> None:
    slo = {"name": "x", "service": "gw", "errors": {"max_ratio": 0.01}}
    with pytest.raises(AlertsConfigError, match=r"slos: names must be unique, repeated: \['x'\]"):
        parse_alerts_config({"slos": [slo, slo]})
    assert duration_s("90s") == 90 and duration_s("2w") == 1_209_600
    for bad in ("1.5h", "0m", "5 min", ""):
        with pytest.raises(ValueError, match="expected a duration"):
            duration_s(bad)


def test_cli_check_and_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert hotspan_main(["alerts", "check", str(EXAMPLE)]) == 0
    assert "3 SLO(s), valid" in capsys.readouterr().out
    assert hotspan_main(["alerts", "rules", str(EXAMPLE)]) == 0
    assert "alert: HotspanSLOBurnRate" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("slos: [{name: x, service: gw}]\n", encoding="utf-8")
    assert hotspan_main(["alerts", "rules", str(bad)]) == 2
    assert "slos.0: set exactly one of latency, errors" in capsys.readouterr().err
    assert hotspan_main(["alerts", "check", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read SLO file" in capsys.readouterr().err
