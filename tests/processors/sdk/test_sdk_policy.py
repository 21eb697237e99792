"""Sampling policy config: validation (every error, each naming its key) and loading from each source."""

import json
import sys
from pathlib import Path

import pytest

from hotspan_sdk import BaggageSampler, ConfigError, SamplingConfig, SamplingPolicy
from hotspan_sdk.config_source import load_document

EXAMPLE = {
    "default_ratio": 0.1,
    "policies": [
        {"name": "debug", "match": {"sample_policy": "debug-high"}, "sample": "always"},
        {"match": {"sample_policy": "off"}, "sample": "never"},
        {"match": {"tenant_id": "staging-*"}, "ratio": 0.5, "channel": "gray"},
    ],
}
EXAMPLE_YAML = """
default_ratio: 0.1
policies:
  - name: debug
    match: {sample_policy: debug-high}
    sample: always
  - match: {sample_policy: "off"}
    sample: never
  - match: {tenant_id: staging-*}
    ratio: 0.5
    channel: gray
"""


def test_example_document_is_valid() -> None:
    config = SamplingConfig.from_mapping(EXAMPLE)
    assert config.default_ratio == 0.1
    assert [policy.label for policy in config.policies] == ["debug", "sample_policy=off", "tenant_id=staging-*"]
    assert config.policies[2].ratio == 0.5
    assert config.policies[2].channel == "gray"


def test_every_error_is_reported_with_its_key() -> None:
    document = {
        "default_ratio": 1.5,
        "default_channel": "",
        "polices": [],
        "policies": [
            {"match": {"tenant_id": "a"}, "ratio": True},
            {"match": {}, "sample": "sometimes", "chanel": "x"},
            {"sample": "always"},
            {"match": {"k": "v"}, "sample": "always", "ratio": 0.5, "name": ""},
            "not a mapping",
        ],
    }
    with pytest.raises(ConfigError) as caught:
        SamplingConfig.from_mapping(document)
    keys = [issue.key for issue in caught.value.issues]
    assert keys == [
        "polices",
        "policies[0].ratio",
        "policies[1].chanel",
        "policies[1].match",
        "policies[1].sample",
        "policies[2].match",
        "policies[3].sample",
        "policies[3].name",
        "policies[4]",
        "default_ratio",
        "default_channel",
    ]
    message = str(caught.value)
    assert "11 errors" in message
    assert "policies[0].ratio: must be a number in [0, 1], got True" in message


def test_policies_must_be_a_list() -> None:
    with pytest.raises(ConfigError, match="policies: must be a list"):
        SamplingConfig.from_mapping({"policies": {"match": {}}})


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="<root>: must be a mapping"):
        SamplingConfig.from_mapping(["policies"])


def test_dataclasses_validate_when_built_directly() -> None:
    with pytest.raises(ConfigError) as caught:
        SamplingPolicy(match={"tenant_id": "a"}, ratio=-1, channel="")
    assert [issue.key for issue in caught.value.issues] == ["ratio", "channel"]
    with pytest.raises(ConfigError, match="default_ratio"):
        SamplingConfig(default_ratio=float("nan"))


def test_from_config_accepts_json_file(tmp_path: Path) -> None:
    path = tmp_path / "policies.json"
    path.write_text(json.dumps(EXAMPLE))
    assert BaggageSampler.from_config(path).config == SamplingConfig.from_mapping(EXAMPLE)
    assert BaggageSampler.from_config(str(path)).config == SamplingConfig.from_mapping(EXAMPLE)


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".conf"])
def test_from_config_accepts_yaml_file(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"policies{suffix}"
    path.write_text(EXAMPLE_YAML)
    assert BaggageSampler.from_config(path).config == SamplingConfig.from_mapping(EXAMPLE)


def test_from_config_accepts_inline_json_and_yaml() -> None:
    expected = SamplingConfig.from_mapping(EXAMPLE)
    assert BaggageSampler.from_config(json.dumps(EXAMPLE)).config == expected
    assert BaggageSampler.from_config(EXAMPLE_YAML).config == expected


def test_from_env_reads_path_or_inline(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(EXAMPLE_YAML)
    expected = SamplingConfig.from_mapping(EXAMPLE)
    assert BaggageSampler.from_env({"HOTSPAN_SAMPLING_POLICIES": str(path)}).config == expected
    assert BaggageSampler.from_env({"HOTSPAN_SAMPLING_POLICIES": json.dumps(EXAMPLE)}).config == expected


def test_from_env_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOTSPAN_SAMPLING_POLICIES", json.dumps(EXAMPLE))
    assert BaggageSampler.from_env().config == SamplingConfig.from_mapping(EXAMPLE)


@pytest.mark.parametrize("environ", [{}, {"HOTSPAN_SAMPLING_POLICIES": "  "}])
def test_from_env_unset_means_sdk_default(environ: dict[str, str]) -> None:
    config = BaggageSampler.from_env(environ).config
    assert config.policies == ()
    assert config.default_ratio == 1.0


def test_env_errors_name_the_variable_and_keys() -> None:
    with pytest.raises(ConfigError) as caught:
        BaggageSampler.from_env({"HOTSPAN_SAMPLING_POLICIES": '{"default_ratio": 7}'})
    assert "from HOTSPAN_SAMPLING_POLICIES" in str(caught.value)
    assert [issue.key for issue in caught.value.issues] == ["default_ratio"]


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError) as caught:
        BaggageSampler.from_config(str(missing))
    assert caught.value.issues[0].key == str(missing)
    assert "cannot read" in caught.value.issues[0].message


def test_invalid_json_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="invalid JSON"):
        BaggageSampler.from_config(path)


def test_invalid_yaml_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_document("policies:\n  - [unclosed\n", "HOTSPAN_SAMPLING_POLICIES")


def test_document_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_document("- 1\n- 2\n")


def test_yaml_without_pyyaml_fails_clearly_and_json_still_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # makes `import yaml` raise ImportError
    with pytest.raises(ConfigError, match="YAML needs PyYAML"):
        BaggageSampler.from_config(EXAMPLE_YAML)
    assert BaggageSampler.from_config(json.dumps(EXAMPLE)).config == SamplingConfig.from_mapping(EXAMPLE)
