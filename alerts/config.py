"""SLO files: the objectives Hotspan alerts on, validated with pydantic (every problem reported at once, each
naming its key).

An SLO file (YAML) sets the tenant the evaluator reads, Hotspan's external URL (for links), the evaluator's
interval, where alerts go (``alertmanager_url``, ``webhook_url``), the burn-rate ``windows`` (default: the SRE
workbook's) and the ``slos``: each a ``service`` with an optional ``operation`` (span name) and ``span_kind``, or
a ``stage``, and one objective, ``latency: {percentile, threshold_ms}`` or ``errors: {max_ratio}``. The
annotated example ``alerts/example.slo.yaml`` is loaded by the tests, so it stays valid.

Objectives become error budgets: ``latency`` allows ``1 - percentile/100`` of requests slower than
``threshold_ms``; ``errors`` allows ``max_ratio`` of requests to fail. Thresholds must be bucket bounds of the
histogram the SLO is evaluated on (span metrics: :data:`storage.rollup_sql.SPAN_BUCKETS_MS`; stages:
:data:`processors.pipeline.trace_metrics.STAGE_BUCKETS_S`), so "slower than the threshold" is exact in both
ClickHouse and Prometheus.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from analysis import STAGES
from processors.pipeline.trace_metrics import STAGE_BUCKETS_S
from query.store import DEFAULT_TENANT, SPAN_BUCKETS_MS, TENANT_NAME
from units import NS_PER_S
from units.durations import DurationError, parse_go_duration

_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
SPAN_KINDS = ("Server", "Client", "Producer", "Consumer", "Internal", "Unspecified", "any")
RESERVED_LABELS = ("alertname", "slo", "service", "operation", "stage", "severity", "tenant")
"""Labels Hotspan sets itself; an SLO's extra ``labels`` may not use them."""


class AlertsConfigError(ValueError):
    """An SLO file that cannot be used; the message lists every problem, each with its key path."""


def duration_s(text: str) -> int:
    """Whole seconds of a positive Prometheus-style duration with one unit (``30s``, ``5m``, ``1h``, ``3d``,
    ``1w``; parsed by :func:`units.durations.parse_go_duration`).

    Raises:
        ValueError: any other form (several units, a fraction, zero, a sign, under a second).
    """
    stripped = str(text).strip()
    try:
        nanoseconds = parse_go_duration(stripped, days=True)
    except DurationError:
        nanoseconds = 0
    whole_seconds = nanoseconds % NS_PER_S == 0 and stripped[:1].isdigit()
    if nanoseconds <= 0 or not whole_seconds or not stripped.rstrip("smhdw").isdigit():
        raise ValueError(f"expected a duration like 30s, 5m, 1h, 3d, got {text!r}")
    return nanoseconds // NS_PER_S


Duration = Annotated[str, Field(description="`<n>s|m|h|d|w`, e.g. `5m`.")]


class BurnWindow(BaseModel):
    """One multi-window burn-rate condition: alert when the budget burns at ``burn_rate`` or faster over both
    the ``long`` window and the ``short`` one (the short one makes the alert stop soon after the burn does)."""

    model_config = ConfigDict(extra="forbid")

    long: Duration
    short: Duration
    burn_rate: float = Field(gt=0, description="Multiple of the budget-exhausting rate, e.g. 14.4.")
    severity: str = Field(pattern=r"^[A-Za-z0-9_-]+$", description="Label `severity`, e.g. `page`, `ticket`.")

    @field_validator("long", "short")
    @classmethod
    def _duration(cls, value: str) -> str:
        duration_s(value)
        return value

    @model_validator(mode="after")
    def _short_below_long(self) -> BurnWindow:
        if duration_s(self.short) >= duration_s(self.long):
            raise ValueError(f"short ({self.short}) must be shorter than long ({self.long})")
        return self

    @property
    def long_s(self) -> int:
        return duration_s(self.long)

    @property
    def short_s(self) -> int:
        return duration_s(self.short)


WORKBOOK_WINDOWS: tuple[BurnWindow, ...] = (
    BurnWindow(long="1h", short="5m", burn_rate=14.4, severity="page"),
    BurnWindow(long="6h", short="30m", burn_rate=6.0, severity="page"),
    BurnWindow(long="3d", short="6h", burn_rate=1.0, severity="ticket"),
)
"""The recommended multi-window, multi-burn-rate alerts of the Google SRE workbook for a 30-day SLO (The Site
Reliability Workbook, ch. 5 "Alerting on SLOs", section 6 "Multiwindow, Multi-Burn-Rate Alerts",
https://sre.google/workbook/alerting-on-slos/): page when 2 % of the budget burns in 1 h (burn rate 14.4) or
5 % in 6 h (6); ticket when 10 % burns in 3 d (1); each with a short window of 1/12 of the long one."""


class LatencyObjective(BaseModel):
    """``percentile`` % of requests complete within ``threshold_ms``."""

    model_config = ConfigDict(extra="forbid")

    percentile: float = Field(gt=0, lt=100, description="e.g. 95 for p95.")
    threshold_ms: float = Field(gt=0)

    @property
    def budget(self) -> float:
        """Fraction of requests allowed slower than the threshold."""
        return 1.0 - self.percentile / 100.0


class ErrorObjective(BaseModel):
    """At most ``max_ratio`` of requests fail (span status Error)."""

    model_config = ConfigDict(extra="forbid")

    max_ratio: float = Field(gt=0, lt=1, description="e.g. 0.01 for 1 %.")

    @property
    def budget(self) -> float:
        return self.max_ratio


class Slo(BaseModel):
    """One objective over one service's spans (optionally one operation and kind) or over one stage of the
    requests a service roots."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Unique; label `slo`.")
    service: str = Field(min_length=1)
    operation: str | None = Field(None, min_length=1, description="Span name; default every operation.")
    span_kind: str = Field("Server", description="Span kind of the spans counted; `any` for every kind.")
    stage: str | None = Field(None, description="A stage of analysis.STAGES; excludes operation and errors.")
    latency: LatencyObjective | None = None
    errors: ErrorObjective | None = None
    windows: list[BurnWindow] | None = Field(None, description="Overrides the file's windows.")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels on this SLO's alerts.")
    summary: str | None = Field(None, description="Annotation `summary`; default generated.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("1-100 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value

    @field_validator("span_kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in SPAN_KINDS:
            raise ValueError(f"one of {', '.join(SPAN_KINDS)}")
        return value

    @field_validator("stage")
    @classmethod
    def _stage(cls, value: str | None) -> str | None:
        if value is not None and value not in STAGES:
            raise ValueError(f"unknown stage {value!r}; one of {', '.join(STAGES)}")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [key for key in value if not _LABEL.match(key) or key in RESERVED_LABELS]
        if bad:
            raise ValueError(f"label names must be Prometheus names other than {RESERVED_LABELS}: {bad}")
        return value

    @model_validator(mode="after")
    def _objective(self) -> Slo:
        problems = []
        if (self.latency is None) == (self.errors is None):
            problems.append("set exactly one of latency, errors")
        if self.stage is not None and self.operation is not None:
            problems.append("stage and operation exclude each other")
        if self.stage is not None and self.errors is not None:
            problems.append("a stage SLO is a latency SLO (stages have no error status)")
        if self.latency is not None:
            threshold = self.latency.threshold_ms
            if self.stage is not None and threshold / 1000 not in STAGE_BUCKETS_S:
                bounds = ", ".join(f"{b * 1000:g}" for b in STAGE_BUCKETS_S)
                problems.append(f"latency.threshold_ms {threshold:g} is not a stage histogram bound (ms): {bounds}")
            if self.stage is None and threshold not in SPAN_BUCKETS_MS:
                bounds = ", ".join(f"{b:g}" for b in SPAN_BUCKETS_MS)
                problems.append(f"latency.threshold_ms {threshold:g} is not a span histogram bound (ms): {bounds}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def budget(self) -> float:
        """Fraction of requests allowed to be bad."""
        objective = self.latency if self.latency is not None else self.errors
        assert objective is not None
        return objective.budget

    @property
    def kind(self) -> str:
        """``latency`` or ``errors``."""
        return "latency" if self.latency is not None else "errors"

    def selector_labels(self) -> dict[str, str]:
        """The labels naming what this SLO is about: ``service`` and ``operation`` or ``stage`` when set."""
        labels = {"service": self.service}
        if self.operation is not None:
            labels["operation"] = self.operation
        if self.stage is not None:
            labels["stage"] = self.stage
        return labels


class AlertsConfig(BaseModel):
    """A whole SLO file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    tenant: str = DEFAULT_TENANT
    external_url: str = Field("http://127.0.0.1:4318", pattern=r"^https?://")
    interval_s: float = Field(30.0, gt=0, description="Built-in evaluator period, seconds.")
    alertmanager_url: str | None = Field(None, pattern=r"^https?://")
    webhook_url: str | None = Field(None, pattern=r"^https?://")
    resend_s: float = Field(60.0, gt=0, description="Firing alerts are re-sent to Alertmanager this often, s.")
    windows: list[BurnWindow] = Field(default_factory=lambda: list(WORKBOOK_WINDOWS), min_length=1)
    slos: list[Slo] = Field(min_length=1)

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str) -> str:
        if not TENANT_NAME.match(value):
            raise ValueError("1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> AlertsConfig:
        names = [slo.name for slo in self.slos]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"slos: names must be unique, repeated: {repeated}")
        return self

    def windows_of(self, slo: Slo) -> list[BurnWindow]:
        """The burn-rate windows of ``slo``: its own, else the file's."""
        return slo.windows if slo.windows is not None else self.windows


def parse_alerts_config(data: Any) -> AlertsConfig:
    """Validate a parsed SLO document.

    Raises:
        AlertsConfigError: listing every problem as ``key.path: message``.
    """
    try:
        return AlertsConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            path = ".".join(str(part) for part in error["loc"]) or "(file)"
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(f"{path}: {message}")
        raise AlertsConfigError("invalid SLO file:\n  " + "\n  ".join(problems)) from exc


def load_alerts_config(path: str | Path) -> AlertsConfig:
    """Read and validate an SLO file.

    Raises:
        AlertsConfigError: unreadable file, bad YAML, or invalid content (every problem listed).
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise AlertsConfigError(f"cannot read SLO file {path}: {exc}") from exc
    return parse_alerts_config(data)
