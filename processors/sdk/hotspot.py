"""HotspotSpanProcessor: flag slow spans (static rules or rolling p95) before they are exported."""

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from opentelemetry import metrics
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from hotspan_sdk import attributes as attr
from hotspan_sdk.config_errors import ConfigError, ConfigIssue
from hotspan_sdk.flagged_span import with_attributes
from hotspan_sdk.globs import GlobMatcher, compile_glob
from hotspan_sdk.hotspot_config import AdaptiveConfig, StaticRule
from hotspan_sdk.quantile import WindowedQuantileSketch

_NS_PER_MS = 1_000_000
_UNKNOWN_SERVICE = "unknown_service"


class _KeyState:
    """What one (service, span name) needs per span: its threshold and, in adaptive mode, its sketch
    and the durations observed since the sketch last learned (``pending``, ``None`` for static keys)."""

    __slots__ = ("metric_attributes", "pending", "reason", "sketch", "threshold_ms")

    def __init__(
        self,
        threshold_ms: float | None,
        reason: str,
        sketch: WindowedQuantileSketch | None,
        metric_attributes: Mapping[str, str],
    ) -> None:
        self.threshold_ms = threshold_ms
        self.reason = reason
        self.sketch = sketch
        self.pending: list[float] | None = None if sketch is None else []
        self.metric_attributes = metric_attributes


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
      the spans before it; durations are queued per key and every ``refresh_every`` of them are
      added to the sketch at once, which then refreshes the estimate (one pass in C-level iterators
      instead of a Python call per span: this keeps the processor's cost per span under a
      microsecond). Keys with a static rule are not learned: an explicit SLO wins.

    A span whose duration (``end_time - start_time``, ns, compared in ms) is strictly greater than its
    threshold is exported with ``hotspan.hotspot=true``, ``hotspan.hotspot.reason`` (``static`` |
    ``p95``), ``hotspan.hotspot.threshold_ms`` and ``hotspan.hotspot.duration_ms`` (floats, ms), and
    counted by the counter ``hotspan.hotspot.spans`` (attributes ``service.name``, ``span.name``).
    Every ended span the SDK hands over is observed, sampled or record-only alike.

    How the flag reaches the exporter: the SDK (1.37+) freezes a span's attributes before any
    processor hook runs at end, so the wrapped processor receives an annotated copy of flagged spans
    (see :mod:`hotspan_sdk.flagged_span`); unflagged spans pass through untouched. Processors
    registered beside this one, rather than wrapped by it, see the unflagged span.

    Memory: at most ``max_keys`` keys (least recently learning evicted first, static keys in the order
    they came; an evicted key re-learns from scratch), each holding at most two sketch halves of
    ``max_buckets`` entries and ``refresh_every`` queued durations in adaptive mode; plus one small dict
    per ``service.name`` seen (a TracerProvider has one).

    Thread-safety: ``on_end`` may run on many threads at once. The per-span path takes no lock: a key
    lookup and a list append are atomic. One lock guards adding or evicting a key and each sketch
    update, which takes exactly the queued durations it adds, so no observation is lost or counted
    twice. Never raises from span hooks for valid spans; never blocks on I/O itself.

    ``on_start`` and ``_on_ending`` are the wrapped processor's own bound methods: this processor
    adds nothing there, and skipping a forwarding frame is measurable at SDK span costs.
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
        self.on_start = next_processor.on_start  # type: ignore[method-assign]
        self._on_ending = next_processor._on_ending  # type: ignore[method-assign]
        self._rules: tuple[tuple[GlobMatcher, GlobMatcher, StaticRule], ...] = tuple(
            (compile_glob(rule.service), compile_glob(rule.name), rule) for rule in rule_list
        )
        self._adaptive: AdaptiveConfig | None = adaptive
        tuning = adaptive or AdaptiveConfig()
        self._quantile = tuning.quantile
        self._min_samples = tuning.min_samples
        self._refresh_every = tuning.refresh_every
        self._max_keys = max_keys
        self._lock = threading.Lock()
        # Every key's state twice: in recency order for eviction (changed under the lock only), and
        # by service then span name for the per-span lookup, which then builds no key tuple.
        self._states: OrderedDict[tuple[str, str], _KeyState] = OrderedDict()
        self._by_service: dict[str, dict[str, _KeyState]] = {}
        # The resource is the same object for every span of a TracerProvider: remember the last one
        # with its service's states, so the service name is looked up once, not per span. A tuple
        # swap is atomic.
        self._last_service: tuple[object, str, dict[str, _KeyState]] = (None, _UNKNOWN_SERVICE, {})
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("hotspan.processors.sdk")
        self._counter = meter.create_counter(
            attr.HOTSPOT_SPANS_METRIC,
            unit="{span}",
            description="Spans flagged as hotspots by HotspotSpanProcessor.",
        )

    @property
    def tracked_keys(self) -> int:
        """(service, span name) keys held now; at most ``max_keys``."""
        return len(self._states)

    @property
    def tracked_buckets(self) -> int:
        """Sketch buckets held now across all keys (adaptive memory, in dict entries)."""
        with self._lock:
            return sum(s.sketch.bucket_count for s in self._states.values() if s.sketch is not None)

    def on_end(self, span: ReadableSpan) -> None:
        # The hot path of every span: one frame, locals only, no lock (see the class docstring). The
        # ReadableSpan fields are read directly, not through their properties, which cost a tenth of
        # this processor's time; tests/processors/sdk/test_sdk_internals.py pins them.
        start_ns, end_ns = span._start_time, span._end_time
        if start_ns is not None and end_ns is not None:
            resource = span._resource
            last_service = self._last_service
            if last_service[0] is not resource:
                last_service = self._service_of(resource)
            name = span._name
            state = last_service[2].get(name) or self._admit(last_service[1], name)
            duration_ms = (end_ns - start_ns) / _NS_PER_MS
            threshold_ms = state.threshold_ms
            pending = state.pending
            if pending is not None:
                pending.append(duration_ms)
                if len(pending) >= self._refresh_every:
                    self._learn(last_service[1], name, state)
            if threshold_ms is not None and duration_ms > threshold_ms:
                span = self._flag(span, state, threshold_ms, duration_ms)
        self._next.on_end(span)

    def shutdown(self) -> None:
        self._next.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._next.force_flush(timeout_millis)

    def _service_of(self, resource: Resource) -> tuple[Resource, str, dict[str, _KeyState]]:
        service = str(resource.attributes.get("service.name", _UNKNOWN_SERVICE))
        with self._lock:
            last_service = (resource, service, self._by_service.setdefault(service, {}))
        self._last_service = last_service
        return last_service

    def _admit(self, service: str, name: str) -> _KeyState:
        """The key's state, created (and the least recent key evicted beyond ``max_keys``) if absent."""
        key = (service, name)
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = self._new_state(key)
                self._by_service.setdefault(service, {})[name] = state
                if len(self._states) > self._max_keys:
                    (old_service, old_name), _ = self._states.popitem(last=False)
                    del self._by_service[old_service][old_name]
            return state

    def _learn(self, service: str, name: str, state: _KeyState) -> None:
        """Add the key's queued durations to its sketch and refresh its threshold."""
        pending, sketch = state.pending, state.sketch
        assert pending is not None and sketch is not None  # only adaptive keys queue durations
        with self._lock:
            if len(pending) < self._refresh_every:  # another thread learned from them already
                return
            # Take exactly what is there now; appends racing with this stay queued for next time.
            durations = pending[:]
            del pending[: len(durations)]
            sketch.add_many(durations)
            if sketch.count >= self._min_samples:
                state.threshold_ms = sketch.upper_bound(self._quantile)
            key = (service, name)
            if key in self._states:
                self._states.move_to_end(key)

    def _flag(self, span: ReadableSpan, state: _KeyState, threshold_ms: float, duration_ms: float) -> ReadableSpan:
        """Count the hotspot and return the span's flagged copy."""
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
                return _KeyState(rule.threshold_ms, attr.REASON_STATIC, None, metric_attributes)
        adaptive = self._adaptive
        if adaptive is None:
            return _KeyState(None, attr.REASON_STATIC, None, metric_attributes)
        sketch = WindowedQuantileSketch(adaptive.window, adaptive.relative_accuracy)
        return _KeyState(None, attr.REASON_P95, sketch, metric_attributes)
