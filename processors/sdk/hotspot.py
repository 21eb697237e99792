"""HotspotSpanProcessor: flag slow spans (static rules or rolling p95) before they are exported."""

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from opentelemetry import metrics
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from processors.sdk import attributes as attr
from processors.sdk.config_errors import ConfigError, ConfigIssue
from processors.sdk.flagged_span import with_attributes
from processors.sdk.globs import GlobMatcher, compile_glob
from processors.sdk.hotspot_config import AdaptiveConfig, StaticRule
from processors.sdk.quantile import WindowedQuantileSketch

_NS_PER_MS = 1_000_000
_UNKNOWN_SERVICE = "unknown_service"
_MAX_STRIPES = 16


class _KeyState:
    """What one (service, span name) needs per span: its threshold and, in adaptive mode, its sketch."""

    __slots__ = ("metric_attributes", "reason", "sketch", "threshold_ms", "until_refresh")

    def __init__(
        self,
        threshold_ms: float | None,
        reason: str,
        sketch: WindowedQuantileSketch | None,
        until_refresh: int,
        metric_attributes: Mapping[str, str],
    ) -> None:
        self.threshold_ms = threshold_ms
        self.reason = reason
        self.sketch = sketch
        self.until_refresh = until_refresh
        self.metric_attributes = metric_attributes


class _Stripe:
    """One lock and the LRU-ordered key states hashed to it."""

    __slots__ = ("capacity", "lock", "states")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lock = threading.Lock()
        self.states: OrderedDict[tuple[str, str], _KeyState] = OrderedDict()


class HotspotSpanProcessor(SpanProcessor):
    """Wraps the exporting processor and flags spans slower than their (service, span name) threshold.

    Place it where the exporting processor would go::

        provider.add_span_processor(HotspotSpanProcessor(BatchSpanProcessor(exporter), adaptive=True))

    Thresholds, per (``service.name`` of the span's resource, span name):

    * **static**: the first :class:`StaticRule` whose globs match gives ``threshold_ms``;
    * **p95** (adaptive): otherwise, when ``adaptive`` is set, the rolling ``quantile`` of that key's
      recent durations from a :class:`WindowedQuantileSketch` (DDSketch-style, bounded memory), once
      the key has ``min_samples`` observations; precisely the upper edge of the sketch bucket holding
      that quantile, so a span is flagged only when it is certainly slower than the quantile, and a
      key whose spans all take the same time flags none. A span is compared with the estimate from
      the spans before it, then added; the estimate is refreshed every ``refresh_every`` spans.
      Keys with a static rule are not learned: an explicit SLO wins.

    A span whose duration (``end_time - start_time``, ns, compared in ms) is strictly greater than its
    threshold is exported with ``hotspan.hotspot=true``, ``hotspan.hotspot.reason`` (``static`` |
    ``p95``), ``hotspan.hotspot.threshold_ms`` and ``hotspan.hotspot.duration_ms`` (floats, ms), and
    counted by the counter ``hotspan.hotspot.spans`` (attributes ``service.name``, ``span.name``).
    Every ended span the SDK hands over is observed, sampled or record-only alike.

    How the flag reaches the exporter: the SDK (1.37+) freezes a span's attributes before any
    processor hook runs at end, so the wrapped processor receives an annotated copy of flagged spans
    (see :mod:`processors.sdk.flagged_span`); unflagged spans pass through untouched. Processors
    registered beside this one, rather than wrapped by it, see the unflagged span.

    Memory: at most ``max_keys`` keys (least recently seen evicted first; an evicted key re-learns from
    scratch), each holding at most two sketch halves of ``max_buckets`` entries in adaptive mode.

    Thread-safety: ``on_end`` may run on many threads at once. Keys are hashed onto up to 16 stripes,
    each with its own lock held only for the key lookup and the sketch update; the counter and the
    copy happen outside it. Never raises from span hooks for valid spans; never blocks on I/O itself.
    """

    def __init__(
        self,
        next_processor: SpanProcessor,
        rules: Iterable[StaticRule] = (),
        adaptive: AdaptiveConfig | bool | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        max_keys: int = 1024,
    ) -> None:
        """Create the processor.

        Args:
            next_processor: The processor that exports (e.g. ``BatchSpanProcessor``); every hook is
                forwarded to it, ``on_end`` with the flagged copy where a span is flagged.
            rules: Static rules, first match wins.
            adaptive: ``True`` for :class:`AdaptiveConfig` defaults, a config, or ``None``/``False`` for
                static rules only.
            meter_provider: Where the counter lives; default the global meter provider.
            max_keys: Bound on tracked (service, span name) keys, >= 1.

        Raises:
            ConfigError: No rules and no adaptive mode, a rule that is not a ``StaticRule``, or
                ``max_keys`` < 1; every problem is listed.
        """
        rule_list = list(rules)
        issues = [
            ConfigIssue(f"rules[{i}]", f"must be a StaticRule, got {type(rule).__name__}")
            for i, rule in enumerate(rule_list)
            if not isinstance(rule, StaticRule)
        ]
        if adaptive is True:
            adaptive = AdaptiveConfig()
        elif adaptive is False:
            adaptive = None
        elif adaptive is not None and not isinstance(adaptive, AdaptiveConfig):
            issues.append(ConfigIssue("adaptive", f"must be bool or AdaptiveConfig, got {adaptive!r}"))
        if not rule_list and adaptive is None:
            issues.append(ConfigIssue("rules", "give static rules, adaptive mode, or both"))
        if not isinstance(max_keys, int) or isinstance(max_keys, bool) or max_keys < 1:
            issues.append(ConfigIssue("max_keys", f"must be an integer >= 1, got {max_keys!r}"))
        if issues:
            raise ConfigError("HotspotSpanProcessor config", issues)

        self._next = next_processor
        self._rules: tuple[tuple[GlobMatcher, GlobMatcher, StaticRule], ...] = tuple(
            (compile_glob(rule.service), compile_glob(rule.name), rule) for rule in rule_list
        )
        self._adaptive: AdaptiveConfig | None = adaptive
        tuning = adaptive or AdaptiveConfig()
        self._quantile = tuning.quantile
        self._min_samples = tuning.min_samples
        self._refresh_every = tuning.refresh_every
        stripe_count = _MAX_STRIPES if max_keys >= _MAX_STRIPES else 1
        self._stripe_mask = stripe_count - 1
        self._stripes = tuple(_Stripe(max_keys // stripe_count) for _ in range(stripe_count))
        # The resource is the same object for every span of a TracerProvider: remember the last one
        # so the service name is looked up once, not per span. A tuple swap is atomic.
        self._last_service: tuple[object, str] = (None, _UNKNOWN_SERVICE)
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("hotspan.processors.sdk")
        self._counter = meter.create_counter(
            attr.HOTSPOT_SPANS_METRIC,
            unit="{span}",
            description="Spans flagged as hotspots by HotspotSpanProcessor.",
        )

    @property
    def tracked_keys(self) -> int:
        """(service, span name) keys held now; at most ``max_keys``."""
        return sum(len(stripe.states) for stripe in self._stripes)

    @property
    def tracked_buckets(self) -> int:
        """Sketch buckets held now across all keys (adaptive memory, in dict entries)."""
        total = 0
        for stripe in self._stripes:
            with stripe.lock:
                total += sum(s.sketch.bucket_count for s in stripe.states.values() if s.sketch is not None)
        return total

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._next.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Span) -> None:
        self._next._on_ending(span)

    def on_end(self, span: ReadableSpan) -> None:
        start_ns, end_ns = span.start_time, span.end_time
        if start_ns is not None and end_ns is not None:
            flagged = self._observe(span, (end_ns - start_ns) / _NS_PER_MS)
            if flagged is not None:
                span = flagged
        self._next.on_end(span)

    def shutdown(self) -> None:
        self._next.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._next.force_flush(timeout_millis)

    def _observe(self, span: ReadableSpan, duration_ms: float) -> ReadableSpan | None:
        """Update the key's state with one duration; return the flagged copy, or ``None``.

        The hot path of every span: kept in one frame with locals, no helper calls but the sketch's.
        """
        resource = span.resource
        last_service = self._last_service
        if last_service[0] is resource:
            service = last_service[1]
        else:
            service = str(resource.attributes.get("service.name", _UNKNOWN_SERVICE))
            self._last_service = (resource, service)
        key = (service, span.name)
        stripe = self._stripes[hash(key) & self._stripe_mask]
        with stripe.lock:
            states = stripe.states
            state = states.get(key)
            if state is None:
                state = self._new_state(key)
                states[key] = state
                if len(states) > stripe.capacity:
                    states.popitem(last=False)
            else:
                states.move_to_end(key)
            threshold_ms = state.threshold_ms
            sketch = state.sketch
            if sketch is not None:
                sketch.add(duration_ms)
                state.until_refresh -= 1
                if not state.until_refresh:
                    state.until_refresh = self._refresh_every
                    if sketch.count >= self._min_samples:
                        state.threshold_ms = sketch.upper_bound(self._quantile)
        if threshold_ms is None or duration_ms <= threshold_ms:
            return None
        self._counter.add(1, state.metric_attributes)
        return with_attributes(
            span,
            {
                attr.HOTSPOT: True,
                attr.HOTSPOT_REASON: state.reason,
                attr.HOTSPOT_THRESHOLD_MS: threshold_ms,
                attr.HOTSPOT_DURATION_MS: duration_ms,
            },
        )

    def _new_state(self, key: tuple[str, str]) -> _KeyState:
        service, name = key
        metric_attributes = {attr.METRIC_SERVICE_NAME: service, attr.METRIC_SPAN_NAME: name}
        for service_matches, name_matches, rule in self._rules:
            if service_matches(service) and name_matches(name):
                return _KeyState(rule.threshold_ms, attr.REASON_STATIC, None, 0, metric_attributes)
        adaptive = self._adaptive
        if adaptive is None:
            return _KeyState(None, attr.REASON_STATIC, None, 0, metric_attributes)
        sketch = WindowedQuantileSketch(adaptive.window, adaptive.relative_accuracy)
        return _KeyState(None, attr.REASON_P95, sketch, adaptive.refresh_every, metric_attributes)
