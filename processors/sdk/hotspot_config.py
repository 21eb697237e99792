"""Configuration of :class:`~hotspan_sdk.hotspot.HotspotSpanProcessor`: static rules and the adaptive
(rolling quantile) mode. Plain frozen dataclasses, validated on construction (all problems at once)."""

import math
from dataclasses import dataclass

from hotspan_sdk.config_errors import ConfigError, ConfigIssue
from hotspan_sdk.quantile import DEFAULT_RELATIVE_ACCURACY


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class StaticRule:
    """Flag spans of matching (service, span name) that last longer than ``threshold_ms``.

    Attributes:
        threshold_ms: Milliseconds, > 0. A span is flagged when its duration is strictly greater.
        name: ``fnmatch`` glob over the span name (case-sensitive), default every span.
        service: ``fnmatch`` glob over the resource's ``service.name``, default every service.

    Raises:
        ConfigError: On construction, listing every invalid field.
    """

    threshold_ms: float
    name: str = "*"
    service: str = "*"

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        if not _is_number(self.threshold_ms) or self.threshold_ms <= 0:
            issues.append(ConfigIssue("threshold_ms", f"must be a number > 0, got {self.threshold_ms!r}"))
        for key in ("name", "service"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                issues.append(ConfigIssue(key, f"must be a non-empty glob, got {getattr(self, key)!r}"))
        if issues:
            raise ConfigError("hotspot rule", issues)


@dataclass(frozen=True, slots=True)
class AdaptiveConfig:
    """Adaptive mode: flag spans slower than the rolling ``quantile`` of their (service, span name).

    Attributes:
        quantile: In (0, 1); 0.95 flags about 5% of a steady workload.
        window: Observations per key the estimate covers (between ``window // 2`` and ``window``).
        min_samples: Observations a key needs before any of its spans is flagged; at most
            ``window // 2`` so that a key, once warm, stays warm when the window rotates.
        relative_accuracy: Relative error of the quantile estimate (DDSketch's ``alpha``), in (0, 0.5].
        refresh_every: The threshold is re-estimated after this many observations of a key; in
            between it is reused, which keeps the per-span cost O(1).

    Raises:
        ConfigError: On construction, listing every invalid field.
    """

    quantile: float = 0.95
    window: int = 2048
    min_samples: int = 200
    relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY
    refresh_every: int = 128

    def __post_init__(self) -> None:
        issues: list[ConfigIssue] = []
        if not _is_number(self.quantile) or not 0.0 < self.quantile < 1.0:
            issues.append(ConfigIssue("quantile", f"must be in (0, 1), got {self.quantile!r}"))
        for key, minimum in (("window", 2), ("min_samples", 1), ("refresh_every", 1)):
            value = getattr(self, key)
            if not _is_int(value) or value < minimum:
                issues.append(ConfigIssue(key, f"must be an integer >= {minimum}, got {value!r}"))
        if _is_int(self.window) and _is_int(self.min_samples) and self.min_samples > self.window // 2:
            message = f"must be <= window // 2 ({self.window // 2}), got {self.min_samples}"
            issues.append(ConfigIssue("min_samples", message))
        if not _is_number(self.relative_accuracy) or not 0.0 < self.relative_accuracy <= 0.5:
            issues.append(ConfigIssue("relative_accuracy", f"must be in (0, 0.5], got {self.relative_accuracy!r}"))
        if issues:
            raise ConfigError("adaptive hotspot config", issues)
