"""The collector-side hotspot rule table: static thresholds by service/operation and the rolling quantile.

Document shape (YAML; the packaged ``hotspot_rules.yaml`` is the default and the reference)::

    version: 1
    static:                     # ordered; the first rule matching a span's (service, operation) decides
      - service: ["checkout*"]  # globs over service_name (default every service)
        operation: ["POST /*"]  # globs over the span name (default every operation)
        threshold_ms: 250       # flag spans lasting strictly longer; ms, > 0
        why: checkout SLO       # free text, for the reader
    rolling:
      enabled: true
      quantile: 0.95            # flag spans slower than this quantile of their (service, operation) ...
      min_samples: 20           # ... once the window holds at least this many of its spans

Globs are those of the stage rules (:func:`analysis.stage_rules.glob_regex`): ``*`` and ``?``, case ignored, a
string standing for a list of one. The rolling window's length is the setting ``hotspot_window_s``.

Validation happens at load (pydantic); every problem is reported at once, each under its key path, in one
:class:`HotspotRulesError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from analysis.rule_files import RuleFileError, read_packaged_rules, read_rule_file, validate_rules

DEFAULT_RULES_RESOURCE = "hotspot_rules.yaml"


def _listed(value: object) -> object:
    return [value] if isinstance(value, str) else value


Globs = Annotated[list[str], BeforeValidator(_listed), Field(min_length=1)]


class StaticHotspotRule(BaseModel):
    """Spans of a matching (service, operation) are hotspots when they last longer than ``threshold_ms``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold_ms: float = Field(gt=0, allow_inf_nan=False)
    service: Globs = ["*"]
    operation: Globs = ["*"]
    why: str | None = None


class RollingHotspots(BaseModel):
    """Spans slower than ``quantile`` of their (service, operation)'s recent durations are hotspots."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    quantile: float = Field(0.95, gt=0, lt=1)
    min_samples: int = Field(20, ge=1)


class HotspotRules(BaseModel):
    """The whole table: static rules (first match wins) and the rolling-quantile mode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    static: list[StaticHotspotRule] = []
    rolling: RollingHotspots = RollingHotspots()


class HotspotRulesError(RuleFileError):
    """A hotspot rule table is invalid. ``issues`` lists every problem as ``"<key path>: <message>"``."""

    table = "hotspot rules"


def parse_hotspot_rules(document: object, origin: str = "<document>") -> HotspotRules:
    """Validate a parsed YAML/JSON document as a hotspot rule table.

    Raises:
        HotspotRulesError: every problem, each under its key path.
    """
    return validate_rules(HotspotRules, document, origin, HotspotRulesError)


def load_hotspot_rules(path: str | Path | None = None) -> HotspotRules:
    """The table at ``path`` (YAML), or the packaged default (no static rule, rolling p95) when None.

    Raises:
        HotspotRulesError: the file cannot be read, is not YAML, or breaks the schema (every problem listed).
    """
    if path is None:
        return parse_hotspot_rules(*read_packaged_rules("processors.pipeline", DEFAULT_RULES_RESOURCE))
    return parse_hotspot_rules(read_rule_file(path, HotspotRulesError), str(path))
