"""The rule table: packaged defaults, documented thresholds, user overrides, and every error at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from diagnosis import (
    CLIENT_SIDE_CAUSES,
    RULES,
    Diagnoser,
    RuleTableError,
    default_rule_table,
    load_diagnosis_settings,
    load_rule_table,
)
from diagnosis.rules.base import RuleConfig
from diagnosis.table import parse_rule_table
from hotspan.app import diagnosis_settings
from hotspan.settings import load_settings

UNIT_MARKS = ("(0..1", "(-1..1)", " ms", "Seconds.", "Count.", "(ratio", "(documents)")
"""How a numeric threshold's description states its unit: a share, a correlation, milliseconds, seconds, a count,
a ratio."""


def test_the_packaged_table_holds_every_rule_enabled() -> None:
    table = default_rule_table()
    assert [s.cause for s in table.settings] == list(RULES)
    assert all(s.enabled for s in table.settings)
    assert [rule.cause for rule in Diagnoser(table).rules] == list(RULES)
    assert set(RULES) > CLIENT_SIDE_CAUSES


@pytest.mark.parametrize("cause", list(RULES))
def test_every_threshold_is_documented_with_its_unit(cause: str) -> None:
    model: type[RuleConfig] = RULES[cause].config_model
    for name, field in model.model_fields.items():
        description = field.description or ""
        assert len(description) > 30, (cause, name)
        if field.annotation in (int, float):
            assert any(mark in description for mark in UNIT_MARKS), (cause, name, description)
        assert field.is_required(), f"{cause}.{name}: defaults live in rules.yaml, not in the model"


def test_an_override_changes_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "rules": {
                    "queue_saturation": {"config": {"queue_share_warning": 0.2, "queue_share_critical": 0.4}},
                    "decode_bound": {"enabled": False},
                }
            }
        )
    )
    table = load_rule_table(path)
    defaults = default_rule_table()
    queue = table.config("queue_saturation")
    assert queue.queue_share_warning == 0.2 and queue.min_calls == defaults.config("queue_saturation").min_calls
    assert "decode_bound" not in [rule.cause for rule in Diagnoser(table).rules]
    assert table.config("event_loop_blocking") == defaults.config("event_loop_blocking")


def test_without_defaults_the_file_is_the_whole_table() -> None:
    document = {
        "include_defaults": False,
        "rules": {"decode_bound": {"config": default_rule_table().config("decode_bound").model_dump()}},
    }
    table = parse_rule_table(document)
    assert [rule.cause for rule in Diagnoser(table).rules] == ["decode_bound"]


def test_every_problem_is_reported_at_once_under_its_key() -> None:
    document = {
        "rules": {
            "queue_saturation": {"config": {"queue_share_warning": 2, "queue_sharre_critical": 0.3}},
            "decode_bound": {"config": {"decode_share_min": 0.9, "decode_share_critical": 0.7}},
            "gremlins": {"enabled": True},
        }
    }
    with pytest.raises(RuleTableError) as raised:
        parse_rule_table(document, "mine.yaml")
    issues = raised.value.issues
    assert "rules.queue_saturation.config.queue_share_warning: Input should be less than or equal to 1" in issues
    assert any(i.startswith("rules.queue_saturation.config.queue_sharre_critical: Extra inputs") for i in issues)
    assert "rules.decode_bound.config: Value error, decode_share_critical must be >= decode_share_min" in issues
    assert any(i.startswith("rules.gremlins: unknown rule; known: queue_saturation") for i in issues)
    assert len(issues) == 4 and "mine.yaml" in str(raised.value)


def test_a_partial_config_without_defaults_names_the_missing_keys() -> None:
    document = {"include_defaults": False, "rules": {"decode_bound": {"config": {"decode_share_min": 0.5}}}}
    with pytest.raises(RuleTableError) as raised:
        parse_rule_table(document)
    assert "rules.decode_bound.config.min_calls: required" in " ".join(raised.value.issues)


def test_unreadable_or_malformed_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(RuleTableError, match="cannot be read"):
        load_rule_table(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [1, 2")
    with pytest.raises(RuleTableError, match="cannot be read as YAML"):
        load_rule_table(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("version: 2\nrules: []\n")
    with pytest.raises(RuleTableError) as raised:
        load_rule_table(wrong)
    assert {i.split(":")[0] for i in raised.value.issues} == {"version", "rules"}


def test_settings_come_from_arguments_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Hotspan's settings are the one place environment variables are read (hotspan.settings).
    for name in ("HOTSPAN_PROMETHEUS_URL", "HOTSPAN_DIAGNOSIS_RULES", "HOTSPAN_PROMETHEUS_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    assert diagnosis_settings(load_settings(data_dir=tmp_path)).metrics is None
    override = tmp_path / "rules.yaml"
    override.write_text("rules:\n  redundant_llm_calls:\n    enabled: false\n")
    monkeypatch.setenv("HOTSPAN_PROMETHEUS_URL", "http://127.0.0.1:9090")
    monkeypatch.setenv("HOTSPAN_DIAGNOSIS_RULES", str(override))
    settings = diagnosis_settings(load_settings(data_dir=tmp_path))
    assert settings.metrics is not None and settings.metrics.url == "http://127.0.0.1:9090"  # type: ignore[attr-defined]
    assert not [s for s in settings.rules.settings if s.cause == "redundant_llm_calls" and s.enabled]
    argument = diagnosis_settings(load_settings(data_dir=tmp_path, prometheus_url="http://10.0.0.1:9090/"))
    assert argument.metrics.url == "http://10.0.0.1:9090"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="prometheus_timeout_s"):
        load_diagnosis_settings(prometheus_timeout_s=0)


def test_the_readme_example_is_a_valid_override() -> None:
    readme = (Path(__file__).resolve().parents[2] / "diagnosis" / "README.md").read_text(encoding="utf-8")
    example = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    table = parse_rule_table(yaml.safe_load(example), "diagnosis/README.md")
    assert table.config("queue_saturation").queue_share_warning == 0.15
    assert "decode_bound" not in [rule.cause for rule in Diagnoser(table).rules]
