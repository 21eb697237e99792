"""The diagnosis rule table: which rules run and with which thresholds, as data.

Document shape (YAML; the packaged ``diagnosis/rules.yaml`` is the reference and holds every default)::

    version: 1
    include_defaults: true      # true (default): the packaged table, then this file's entries over it
    rules:
      queue_saturation:         # a rule's cause name (diagnosis.rules.RULES)
        enabled: true           # optional, default true
        config:                 # the rule's thresholds; with include_defaults only the ones you change
          queue_share_warning: 0.15
      decode_bound:
        enabled: false

With ``include_defaults: true`` an entry's ``config`` keys replace the packaged values one by one, and rules
the file does not name keep their packaged entry. With ``false`` the file is the whole table: every rule it
names needs its complete ``config``, and rules it does not name do not run.

Validation happens at load, against each rule's pydantic config model, and every problem is reported at once
under its key path (``rules.queue_saturation.config.queue_share_warning: ...``) in one
:class:`RuleTableError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from analysis.rule_files import RuleFileError, read_packaged_rules, read_rule_file
from diagnosis.rules import RULES
from diagnosis.rules.base import Rule, RuleConfig

DEFAULT_TABLE_RESOURCE = "rules.yaml"


class RuleTableError(RuleFileError):
    """A rule table is invalid. ``issues`` lists every problem as ``"<key path>: <message>"``."""

    table = "diagnosis rules"


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    config: dict[str, Any] = Field(default_factory=dict)


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(1, ge=1, le=1)
    include_defaults: bool = True
    rules: dict[str, _Entry] = Field(default_factory=dict)


@dataclass(frozen=True)
class RuleSetting:
    """One validated row: the rule's cause name, whether it runs, and its config."""

    cause: str
    enabled: bool
    config: RuleConfig


@dataclass(frozen=True)
class RuleTable:
    """A validated rule table, in the packaged table's order (then any further rules in file order)."""

    settings: tuple[RuleSetting, ...]

    def config(self, cause: str) -> RuleConfig:
        """The config of rule ``cause``. Raises ``KeyError`` for a rule the table does not hold."""
        for setting in self.settings:
            if setting.cause == cause:
                return setting.config
        raise KeyError(cause)

    def build(self) -> list[Rule[Any]]:
        """An instance of every enabled rule, in table order."""
        return [RULES[s.cause](s.config) for s in self.settings if s.enabled]


def parse_rule_table(document: object, origin: str = "<document>", defaults: RuleTable | None = None) -> RuleTable:
    """Validate a parsed YAML/JSON document as a rule table.

    Args:
        document: the parsed document.
        origin: where it came from, for messages.
        defaults: the table ``include_defaults: true`` merges over (default: the packaged one); ignored when
            the document sets ``include_defaults: false``.

    Raises:
        RuleTableError: every problem, each under its key path.
    """
    try:
        parsed = _Document.model_validate(document if document is not None else {})
    except ValidationError as error:
        raise RuleTableError(origin, [_issue((), item) for item in error.errors()]) from None
    base: dict[str, tuple[bool, dict[str, Any]]] = {}
    if parsed.include_defaults:
        table = defaults if defaults is not None else default_rule_table()
        base = {s.cause: (s.enabled, s.config.model_dump()) for s in table.settings}
    issues: list[str] = []
    settings: list[RuleSetting] = []
    merged = dict(base)
    for cause, entry in parsed.rules.items():
        enabled = entry.enabled if "enabled" in entry.model_fields_set else merged.get(cause, (True, {}))[0]
        merged[cause] = (enabled, {**merged.get(cause, (True, {}))[1], **entry.config})
    for cause, (enabled, values) in merged.items():
        rule = RULES.get(cause)
        if rule is None:
            issues.append(f"rules.{cause}: unknown rule; known: {', '.join(RULES)}")
            continue
        try:
            settings.append(RuleSetting(cause, enabled, rule.config_model.model_validate(values)))
        except ValidationError as error:
            issues.extend(_issue(("rules", cause, "config"), item) for item in error.errors())
    if issues:
        raise RuleTableError(origin, issues)
    return RuleTable(tuple(settings))


def default_rule_table() -> RuleTable:
    """The packaged table (``diagnosis/rules.yaml``)."""
    document, origin = read_packaged_rules("diagnosis", DEFAULT_TABLE_RESOURCE)
    if isinstance(document, dict):
        document = {**document, "include_defaults": False}
    return parse_rule_table(document, origin)


def load_rule_table(path: str | Path | None = None) -> RuleTable:
    """The table at ``path`` (YAML) merged per its ``include_defaults``, or the packaged one for ``None``.

    Raises:
        RuleTableError: the file cannot be read, is not YAML, or breaks a schema (every problem listed).
    """
    if path is None:
        return default_rule_table()
    return parse_rule_table(read_rule_file(path, RuleTableError), str(path))


def _issue(prefix: tuple[str, ...], item: Any) -> str:
    parts = [*prefix, *(str(part) for part in item["loc"])]
    path = ""
    for part in parts:
        path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
    message = item["msg"]
    if item["type"] == "missing":
        message = "required (no packaged default to fall back on with include_defaults: false)"
    return f"{path or '<document>'}: {message}"
