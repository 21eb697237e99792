"""Hotspan's SDK components for users' own services: hotspot flags and baggage-driven sampling.

Depends only on opentelemetry-api/-sdk and the standard library (PyYAML optional, for YAML configs).

* :class:`HotspotSpanProcessor` wraps the exporting processor and flags slow spans
  (``hotspan.hotspot*`` attributes, counter ``hotspan.hotspot.spans``).
* :class:`BaggageSampler` samples by a policy table over W3C baggage, consistently across services.
* :class:`BaggageSpanProcessor` copies allow-listed baggage entries onto span attributes.
"""

from hotspan_sdk.baggage_processor import BaggageSpanProcessor
from hotspan_sdk.baggage_sampler import BaggageSampler
from hotspan_sdk.config_errors import ConfigError, ConfigIssue
from hotspan_sdk.hotspot import HotspotSpanProcessor
from hotspan_sdk.hotspot_config import AdaptiveConfig, StaticRule
from hotspan_sdk.policy import SamplingConfig, SamplingPolicy
from hotspan_sdk.quantile import WindowedQuantileSketch

__all__ = [
    "AdaptiveConfig",
    "BaggageSampler",
    "BaggageSpanProcessor",
    "ConfigError",
    "ConfigIssue",
    "HotspotSpanProcessor",
    "SamplingConfig",
    "SamplingPolicy",
    "StaticRule",
    "WindowedQuantileSketch",
]
