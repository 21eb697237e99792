"""Tail-sampling policies as data: the document ``HOTSPAN_TAIL_SAMPLING`` names, validated at load.

Names and shapes follow the OpenTelemetry Collector's ``tailsamplingprocessor`` (opentelemetry-collector-contrib,
``processor/tailsamplingprocessor``: README and ``config.go``), so a policy list written for it reads the same
here; ``hotspot`` is Hotspan's own. Document shape (``tail_sampling.example.yaml`` beside this module is a
complete example and a test fixture)::

    decision_cache:                 # remembered decisions, so late spans follow their trace's decision
      sampled_cache_size: 100000    # traces kept; 0 turns the in-memory cache of kept traces off
      non_sampled_cache_size: 100000
    policies:                       # a trace is kept when ANY policy says keep
      - name: errors
        type: status_code
        status_code: {status_codes: [ERROR]}        # ERROR, OK, UNSET: some span has one of them
      - name: slow
        type: latency
        latency: {threshold_ms: 5000}               # trace duration >= threshold (and <= upper_threshold_ms)
      - name: hotspots
        type: hotspot                               # the pipeline's analysis flagged a span (hotspot_rules)
      - name: debug
        type: string_attribute
        string_attribute: {key: sample_policy, values: [debug-high]}
      - name: baseline
        type: probabilistic
        probabilistic: {sampling_percentage: 10}
      - name: budget
        type: rate_limiting
        rate_limiting: {spans_per_second: 500}
      - name: slow-chat
        type: and
        and: {and_sub_policy: [ ...policies of the types above... ]}

Semantics (:mod:`processors.pipeline.tail_sampling` evaluates them):

- ``status_code``: some span of the trace has one of ``status_codes`` (the Collector's upper-case names).
- ``latency``: the trace's duration, from its earliest span start to its latest span end (the Collector's rule,
  not the root span's duration), is at least ``threshold_ms`` and, when ``upper_threshold_ms`` is set, at most it.
- ``hotspot``: at least ``min_spans`` spans of the trace are hotspots by the pipeline's analysis (static
  threshold, rolling quantile or the SDK's ``hotspan.hotspot`` flag; ``processors.pipeline.hotspots``).
- ``string_attribute``: some span has the attribute ``key`` (span attributes, then resource attributes) with one
  of ``values``; regular expressions (searched, as Go's ``MatchString``) with ``enabled_regex_matching``. A W3C
  baggage entry counts once it is on the spans: ``hotspan_sdk.BaggageSpanProcessor`` copies
  ``sample_policy`` onto every span (name the attribute as copied, with its prefix if you set one).
- ``probabilistic``: keeps ``sampling_percentage`` % of traces by the trace ID alone, so every Hotspan instance
  (and a head sampler at a lower rate, OpenTelemetry consistent probability sampling) decides alike: the low 56
  bits of the trace ID are compared with the threshold ``hotspan_sdk.consistent`` computes.
- ``rate_limiting``: keeps traces while the spans it kept in the current second (the pipeline's clock) stay
  within ``spans_per_second``, one budget per tenant: per owner tenant (the bearer token's), and within it per
  request tenant (the ``tenant_id`` attribute the spans carry; one budget for requests naming none).
- ``always_sample``: keeps every trace.
- ``and``: keeps when every sub-policy keeps (evaluated in order, stopping at the first that does not, so a
  rate limit placed last only spends its budget on traces the others chose).

Validation happens at load (pydantic); every problem is reported at once, each under its key path, in one
:class:`TailSamplingError`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from analysis.rule_files import RuleFileError, read_rule_file, validate_rules

StatusName = Literal["ERROR", "OK", "UNSET"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class StatusCodeSpec(_Strict):
    """``status_codes``: the span statuses that make a trace worth keeping."""

    status_codes: list[StatusName] = Field(min_length=1)


class LatencySpec(_Strict):
    """Trace duration bounds in **ms**: ``threshold_ms`` <= duration (<= ``upper_threshold_ms`` when set)."""

    threshold_ms: float = Field(ge=0, allow_inf_nan=False)
    upper_threshold_ms: float | None = Field(None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> LatencySpec:
        if self.upper_threshold_ms is not None and self.upper_threshold_ms < self.threshold_ms:
            raise ValueError("upper_threshold_ms must be at least threshold_ms")
        return self


class HotspotSpec(_Strict):
    """``min_spans``: how many hotspot spans make a trace worth keeping."""

    min_spans: int = Field(1, ge=1)


class StringAttributeSpec(_Strict):
    """Attribute ``key`` equal to one of ``values`` (or matching one, as a regular expression)."""

    key: str = Field(min_length=1)
    values: list[str] = Field(min_length=1)
    enabled_regex_matching: bool = False

    @model_validator(mode="after")
    def _patterns(self) -> StringAttributeSpec:
        if self.enabled_regex_matching:
            for pattern in self.values:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"values: {pattern!r} is not a regular expression: {exc}") from exc
        return self


class ProbabilisticSpec(_Strict):
    """``sampling_percentage``: share of traces kept, in percent (0..100)."""

    sampling_percentage: float = Field(ge=0, le=100, allow_inf_nan=False)


class RateLimitingSpec(_Strict):
    """``spans_per_second``: most spans kept per second and tenant."""

    spans_per_second: int = Field(ge=1)


class _Policy(_Strict):
    name: str = Field(min_length=1)


class StatusCodePolicy(_Policy):
    type: Literal["status_code"]
    status_code: StatusCodeSpec


class LatencyPolicy(_Policy):
    type: Literal["latency"]
    latency: LatencySpec


class HotspotPolicy(_Policy):
    type: Literal["hotspot"]
    hotspot: HotspotSpec = HotspotSpec()


class StringAttributePolicy(_Policy):
    type: Literal["string_attribute"]
    string_attribute: StringAttributeSpec


class ProbabilisticPolicy(_Policy):
    type: Literal["probabilistic"]
    probabilistic: ProbabilisticSpec


class RateLimitingPolicy(_Policy):
    type: Literal["rate_limiting"]
    rate_limiting: RateLimitingSpec


class AlwaysSamplePolicy(_Policy):
    type: Literal["always_sample"]


LeafPolicy = Annotated[
    StatusCodePolicy
    | LatencyPolicy
    | HotspotPolicy
    | StringAttributePolicy
    | ProbabilisticPolicy
    | RateLimitingPolicy
    | AlwaysSamplePolicy,
    Field(discriminator="type"),
]
"""A policy that decides alone (every type but ``and``; the Collector does not nest ``and`` either)."""


class AndSpec(_Strict):
    """``and_sub_policy``: the policies that must all keep a trace."""

    and_sub_policy: list[LeafPolicy] = Field(min_length=1)


class AndPolicy(_Policy):
    type: Literal["and"]
    and_: AndSpec = Field(alias="and")


Policy = Annotated[LeafPolicy | AndPolicy, Field(discriminator="type")]


class DecisionCacheSpec(_Strict):
    """Sizes of the in-memory decision caches (trace IDs remembered, least recently used dropped first)."""

    sampled_cache_size: int = Field(100_000, ge=0)
    non_sampled_cache_size: int = Field(100_000, ge=0)


class TailSamplingConfig(_Strict):
    """The whole document: the policies (a trace is kept when any keeps it) and the decision cache."""

    policies: list[Policy] = Field(min_length=1)
    decision_cache: DecisionCacheSpec = DecisionCacheSpec()

    @model_validator(mode="after")
    def _unique_names(self) -> TailSamplingConfig:
        names = [policy.name for policy in self.policies]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"policy names must be unique; repeated: {repeated}")
        return self


class TailSamplingError(RuleFileError):
    """A tail-sampling document is invalid. ``issues`` lists every problem as ``"<key path>: <message>"``."""

    table = "tail sampling policies"


def parse_tail_sampling(document: object, origin: str = "<document>") -> TailSamplingConfig:
    """Validate a parsed YAML/JSON document as tail-sampling policies.

    Raises:
        TailSamplingError: every problem, each under its key path.
    """
    return validate_rules(TailSamplingConfig, document, origin, TailSamplingError)


def load_tail_sampling(path: str | Path | None) -> TailSamplingConfig | None:
    """The policies in the YAML file at ``path``; None (keep every trace: no tail sampling) when ``path`` is None.

    Raises:
        TailSamplingError: the file cannot be read, is not YAML, or breaks the schema (every problem listed).
    """
    if path is None:
        return None
    return parse_tail_sampling(read_rule_file(path, TailSamplingError), str(path))
