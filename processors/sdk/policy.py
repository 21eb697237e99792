"""The sampling policy table of :class:`~hotspan_sdk.baggage_sampler.BaggageSampler`, as data.

Plain frozen dataclasses (``hotspan_sdk`` must not depend on pydantic), validated on construction;
:meth:`SamplingConfig.from_mapping` validates a parsed JSON/YAML document and reports every problem at
once, each under its key path (``policies[2].ratio``). Document shape::

    {
      "default_ratio": 0.1,                 # keep probability for spans no policy matches, [0, 1]
      "default_channel": "default",         # channel recorded for policies that name none
      "policies": [                         # ordered; the first policy whose "match" holds wins
        {"name": "debug", "match": {"sample_policy": "debug-high"}, "sample": "always"},
        {"match": {"sample_policy": "off"}, "sample": "never"},
        {"match": {"tenant_id": "staging-*"}, "ratio": 0.5, "channel": "gray"}
      ]
    }

``match`` maps baggage keys to ``fnmatch`` globs (case-sensitive); every key must be present in the
baggage and match. A policy sets exactly one of ``sample`` (``"always"`` | ``"never"``) and ``ratio``.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from hotspan_sdk.config_errors import ConfigError, ConfigIssue

SampleMode = Literal["always", "never"]
_SAMPLE_MODES = get_args(SampleMode)
_POLICY_KEYS = ("name", "match", "sample", "ratio", "channel")
_CONFIG_KEYS = ("policies", "default_ratio", "default_channel")


def _ratio_issues(key: str, value: object) -> list[ConfigIssue]:
    # NaN fails the range comparison, so no separate finiteness check is needed.
    if isinstance(value, int | float) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
        return []
    return [ConfigIssue(key, f"must be a number in [0, 1], got {value!r}")]


def _text_issues(key: str, value: object) -> list[ConfigIssue]:
    if isinstance(value, str) and value.strip():
        return []
    return [ConfigIssue(key, f"must be a non-empty string, got {value!r}")]


@dataclass(frozen=True, slots=True)
class SamplingPolicy:
    """One row of the policy table.

    Attributes:
        match: Baggage key -> ``fnmatch`` glob over the entry's value (properties removed). Non-empty.
        sample: ``"always"`` or ``"never"``; exclusive with ``ratio``.
        ratio: Keep probability in [0, 1], decided by consistent probability sampling.
        channel: Recorded as ``hotspan.sampling.channel``; default the config's ``default_channel``.
        name: Recorded as ``hotspan.sampling.policy``; default ``key=glob`` pairs joined by ``,``.

    Raises:
        ConfigError: On construction, listing every invalid field.
    """

    match: Mapping[str, str]
    sample: SampleMode | None = None
    ratio: float | None = None
    channel: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        if not isinstance(self.match, Mapping) or not self.match:
            issues.append(ConfigIssue("match", "must be a non-empty mapping of baggage key to glob"))
        else:
            for key, pattern in self.match.items():
                issues += _text_issues("match", key)
                if not isinstance(pattern, str):
                    issues.append(ConfigIssue(f"match.{key}", f"must be a string glob, got {pattern!r}"))
        if (self.sample is None) == (self.ratio is None):
            issues.append(ConfigIssue("sample", "set exactly one of 'sample' or 'ratio'"))
        if self.sample is not None and self.sample not in _SAMPLE_MODES:
            issues.append(ConfigIssue("sample", f"must be one of {list(_SAMPLE_MODES)}, got {self.sample!r}"))
        if self.ratio is not None:
            issues += _ratio_issues("ratio", self.ratio)
        for key in ("channel", "name"):
            if getattr(self, key) is not None:
                issues += _text_issues(key, getattr(self, key))
        if issues:
            raise ConfigError("sampling policy", issues)

    @property
    def label(self) -> str:
        """The policy's name as recorded on spans."""
        return self.name or ",".join(f"{key}={pattern}" for key, pattern in self.match.items())


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """The whole table: ordered policies, then the default for spans no policy matches.

    Attributes:
        policies: Checked in order; the first whose ``match`` holds decides.
        default_ratio: Keep probability in [0, 1] for root spans no policy matches; children of such
            spans follow their parent (ParentBased).
        default_channel: Channel recorded for policies without one.

    Raises:
        ConfigError: On construction, listing every invalid field.
    """

    policies: Sequence[SamplingPolicy] = ()
    default_ratio: float = 1.0
    default_channel: str = "default"

    def __post_init__(self) -> None:
        issues = [
            ConfigIssue(f"policies[{i}]", f"must be a SamplingPolicy, got {type(policy).__name__}")
            for i, policy in enumerate(self.policies)
            if not isinstance(policy, SamplingPolicy)
        ]
        issues += _ratio_issues("default_ratio", self.default_ratio)
        issues += _text_issues("default_channel", self.default_channel)
        if issues:
            raise ConfigError("sampling config", issues)

    @classmethod
    def from_mapping(cls, raw: object) -> "SamplingConfig":
        """Validate a parsed document (see the module docstring for its shape).

        Raises:
            ConfigError: Every problem in the document, each under its key path; unknown keys are
                errors too, so a misspelt key does not silently fall back to a default.
        """
        if not isinstance(raw, Mapping):
            raise ConfigError("sampling config", [ConfigIssue("<root>", f"must be a mapping, got {raw!r}")])
        issues = [ConfigIssue(str(key), "unknown key") for key in raw if key not in _CONFIG_KEYS]
        raw_policies = raw.get("policies", [])
        policies: list[SamplingPolicy] = []
        if not isinstance(raw_policies, list):
            issues.append(ConfigIssue("policies", f"must be a list, got {raw_policies!r}"))
            raw_policies = []
        for i, item in enumerate(raw_policies):
            where = f"policies[{i}]"
            if not isinstance(item, Mapping):
                issues.append(ConfigIssue(where, f"must be a mapping, got {item!r}"))
                continue
            issues.extend(ConfigIssue(f"{where}.{key}", "unknown key") for key in item if key not in _POLICY_KEYS)
            if "match" not in item:
                issues.append(ConfigIssue(f"{where}.match", "is required"))
                continue
            fields = {key: item[key] for key in _POLICY_KEYS if key in item}
            try:
                policies.append(SamplingPolicy(**fields))
            except ConfigError as error:
                issues += [ConfigIssue(f"{where}.{issue.key}", issue.message) for issue in error.issues]
        defaults = {key: raw[key] for key in ("default_ratio", "default_channel") if key in raw}
        try:
            config = cls(policies=tuple(policies), **defaults)
        except ConfigError as error:
            raise ConfigError("sampling config", [*issues, *error.issues]) from None
        if issues:
            raise ConfigError("sampling config", issues)
        return config
