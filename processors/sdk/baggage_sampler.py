"""BaggageSampler: head sampling driven by W3C baggage, consistent across services."""

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from opentelemetry import baggage
from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, TraceState, get_current_span
from opentelemetry.util.types import Attributes

from hotspan_sdk import attributes as attr
from hotspan_sdk import consistent
from hotspan_sdk.baggage_values import entry_value
from hotspan_sdk.config_errors import ConfigError
from hotspan_sdk.config_source import ConfigSource, load_document, source_name
from hotspan_sdk.environment_variables import HOTSPAN_SAMPLING_POLICIES
from hotspan_sdk.globs import GlobMatcher, compile_glob
from hotspan_sdk.policy import SamplingConfig, SamplingPolicy

# Distinct baggage-value combinations remembered with their matching policy; the cache is emptied
# when full, so high-cardinality keys (tenant IDs) cost a re-match, never unbounded memory.
_MATCH_CACHE_SIZE: Final = 4096


class _Mode(enum.Enum):
    ALWAYS = "always"
    NEVER = "never"
    RATIO = "ratio"
    PARENT_BASED = "parent-based"  # no policy matched


@dataclass(frozen=True, slots=True)
class _CompiledPolicy:
    """A policy ready for the hot path: globs compiled, threshold and results' parts precomputed."""

    matchers: tuple[tuple[int, GlobMatcher], ...]  # (index into the sampler's key tuple, glob)
    mode: _Mode
    threshold: int | None  # rejection threshold for roots / independent decisions; None = never
    attributes: Mapping[str, str] | None  # recorded on sampled spans; None for the default policy
    root_trace_state: TraceState | None  # "ot=th:<T>", the whole tracestate of a sampled root

    def matches(self, values: Sequence[object]) -> bool:
        for index, matcher in self.matchers:
            value = values[index]
            if value is None or not matcher(entry_value(value)):
                return False
        return True


def _threshold_for(ratio: float) -> int | None:
    # Probabilities below 2**-56 cannot be expressed as a threshold; they mean "never".
    if ratio < consistent.MIN_PROBABILITY:
        return None
    return consistent.threshold_for_probability(ratio)


def _root_state(threshold: int | None) -> TraceState | None:
    return None if threshold is None else consistent.with_threshold(None, threshold)


class BaggageSampler(Sampler):
    """Samples by an ordered policy table over the parent context's W3C baggage.

    The first policy (:class:`~hotspan_sdk.policy.SamplingPolicy`) whose globs all match the
    baggage decides. Decision table (``R``/``T``: consistent probability sampling, see
    :mod:`hotspan_sdk.consistent`):

    ============================  ===================  ======================  ======================
    matched policy                root span            parent sampled          parent not sampled
    ============================  ===================  ======================  ======================
    ``sample: always``            sample, ``th:0``     sample (remote: th:0)   sample, ``th:0``
    ``sample: never``             drop                 **sample** (parent)     drop
    ``ratio: r``                  ``R >= T(r)``        sample (parent)         ``R >= T(r)``
    none (``default_ratio`` d)    ``R >= T(d)``        sample (parent)         drop (parent)
    ============================  ===================  ======================  ======================

    Without a match it is exactly ParentBased(consistent ratio ``default_ratio``). Under a sampled
    *local* parent nothing can change the outcome, so the baggage is not even read: that path costs
    what the SDK's ParentBased costs.

    Where a matched policy made the decision, the span records ``hotspan.sampling.policy`` and
    ``hotspan.sampling.channel``: at roots, at a service's entry spans (remote parent) and where a
    policy starts recording under an unsampled local parent. Spans that inherit a sampled local
    parent's decision, and spans no policy matched, carry neither: the decision was not theirs, and
    two attributes on every span would cost about a microsecond per span in the SDK.

    **A sampled parent wins over ``never`` (``sample_policy=off``) and over ratios.** Once an upstream
    service has recorded a trace, dropping here would cut out a subtree and leave a partial trace,
    the one outcome consistent sampling exists to prevent, and a dropped span cannot be recovered
    later while a kept one can still be dropped whole by tail sampling in the collector. ``off`` set
    by the caller before the root span starts drops the whole trace, because the root sees it and
    its children follow. The span kept despite ``off`` records ``hotspan.sampling.policy`` of the
    ``off`` policy, so such traces can be found. Conversely, ``always`` (e.g. ``debug-high``) starts
    recording under an unsampled parent: an explicit debug request is worth a trace that begins here.
    Under an unsampled parent a ratio policy decides independently, but with the trace's shared
    randomness, so it only keeps traces that a root applying the same ratio would have kept.

    Consistency: ``R`` is the ``rv`` of the parent's ``ot`` tracestate when present, else the trace
    ID's low 56 bits; ``T(r)`` is rounded to 4 significant hex digits as the spec recommends. Two
    services with the same policy reach the same decision for the same trace, whether they follow the
    parent or decide independently, so they never split a trace. A sampled span's tracestate carries
    ``ot=th:<T>`` (the parent's, checked for consistency when remote, when following the parent);
    dropped spans carry no ``th``. Other tracestate entries and ``rv`` are kept.

    Baggage values are read without W3C properties (``v;prop=1`` -> ``v``); the propagator has
    already percent-decoded them (see :mod:`hotspan_sdk.baggage_values`).

    Thread-safe: the table is immutable; the match cache is a dict whose single get/set/clear
    operations are atomic. ``should_sample`` raises nothing for string (or ``str()``-able) baggage.
    """

    def __init__(self, config: SamplingConfig | None = None) -> None:
        """Create the sampler from a validated config; ``None`` means no policies, default_ratio 1.0."""
        self._config = config if config is not None else SamplingConfig()
        # Every baggage key any policy reads, once each, in first-use order.
        self._keys: tuple[str, ...] = tuple(dict.fromkeys(key for p in self._config.policies for key in p.match))
        self._policies = tuple(self._compile(policy) for policy in self._config.policies)
        default_threshold = _threshold_for(self._config.default_ratio)
        self._default = _CompiledPolicy(
            matchers=(),
            mode=_Mode.PARENT_BASED,
            threshold=default_threshold,
            attributes=None,
            root_trace_state=_root_state(default_threshold),
        )
        self._match_cache: dict[tuple[object, ...], _CompiledPolicy] = {}

    @classmethod
    def from_config(cls, source: ConfigSource) -> "BaggageSampler":
        """Build from a mapping, a JSON/YAML file path, or inline JSON/YAML text.

        See :mod:`hotspan_sdk.policy` for the document and :mod:`hotspan_sdk.config_source`
        for how a string is told apart from a path.

        Raises:
            ConfigError: Every problem found, each naming its key.
        """
        return cls._load(source, None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "BaggageSampler":
        """Build from ``HOTSPAN_SAMPLING_POLICIES`` (a path, or inline JSON/YAML).

        Unset or blank: no policies and ``default_ratio`` 1.0, i.e. the SDK's default sampling.

        Args:
            environ: The environment to read; default ``os.environ``.

        Raises:
            ConfigError: Every problem found, each naming its key and the variable.
        """
        value = (os.environ if environ is None else environ).get(HOTSPAN_SAMPLING_POLICIES, "")
        if not value.strip():
            return cls()
        return cls._load(value, HOTSPAN_SAMPLING_POLICIES)

    @classmethod
    def _load(cls, source: ConfigSource, origin: str | None) -> "BaggageSampler":
        origin = origin or source_name(source)
        document = load_document(source, origin)
        try:
            config = SamplingConfig.from_mapping(document)
        except ConfigError as error:
            raise ConfigError(f"sampling config from {origin}", error.issues) from None
        return cls(config)

    @property
    def config(self) -> SamplingConfig:
        """The validated table this sampler applies."""
        return self._config

    def get_description(self) -> str:
        return f"BaggageSampler{{policies={len(self._policies)},default_ratio={self._config.default_ratio}}}"

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        parent = get_current_span(parent_context).get_span_context()
        if parent.trace_flags.sampled and parent.is_valid and not parent.is_remote:
            # Most spans: a sampled local parent, whose decision no policy overrides. Skipping the
            # baggage lookup keeps this path as cheap as the SDK's ParentBased.
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, parent.trace_state)
        policy = self._policy_for(parent_context)
        if not parent.is_valid:
            if policy.threshold is not None and (trace_id & consistent.RANDOMNESS_MASK) >= policy.threshold:
                return self._sampled(policy, attributes, policy.root_trace_state)
            return SamplingResult(Decision.DROP)
        parent_state = parent.trace_state
        if policy.mode is _Mode.ALWAYS:
            return self._sampled(policy, attributes, consistent.with_threshold(parent_state, 0))
        if parent.trace_flags.sampled:  # a remote parent: local ones returned above
            return self._sampled(policy, attributes, _checked_remote_state(parent_state, trace_id))
        fields = consistent.ot_fields(parent_state)
        if (
            policy.mode is _Mode.RATIO
            and policy.threshold is not None
            and consistent.randomness_of(trace_id, fields) >= policy.threshold
        ):
            return self._sampled(policy, attributes, consistent.with_threshold(parent_state, policy.threshold))
        if consistent.THRESHOLD_KEY in fields:
            parent_state = consistent.with_threshold(parent_state, None)
        return SamplingResult(Decision.DROP, None, parent_state)

    @staticmethod
    def _sampled(policy: _CompiledPolicy, attributes: Attributes, trace_state: TraceState | None) -> SamplingResult:
        """A keep decision. The SDK builds the span's attributes from the result only, so the
        attributes the span was started with must be handed back, plus the policy's."""
        if policy.attributes is not None:
            attributes = {**attributes, **policy.attributes} if attributes else policy.attributes
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, trace_state)

    def _policy_for(self, parent_context: Context | None) -> _CompiledPolicy:
        if not self._policies:
            return self._default
        entries = baggage.get_all(parent_context)
        if not entries:
            return self._default
        values = tuple(map(entries.get, self._keys))
        cache = self._match_cache
        try:
            policy = cache.get(values)
        except TypeError:  # an unhashable value set by application code: match without caching
            return self._match(values)
        if policy is None:
            policy = self._match(values)
            if len(cache) >= _MATCH_CACHE_SIZE:
                cache.clear()
            cache[values] = policy
        return policy

    def _match(self, values: Sequence[object]) -> _CompiledPolicy:
        for policy in self._policies:
            if policy.matches(values):
                return policy
        return self._default

    def _compile(self, policy: SamplingPolicy) -> _CompiledPolicy:
        # SamplingPolicy guarantees exactly one of ``sample`` and ``ratio``.
        if policy.sample == "always":
            mode, threshold = _Mode.ALWAYS, 0
        elif policy.ratio is None:
            mode, threshold = _Mode.NEVER, None
        else:
            mode, threshold = _Mode.RATIO, _threshold_for(policy.ratio)
        return _CompiledPolicy(
            matchers=tuple((self._keys.index(key), compile_glob(glob)) for key, glob in policy.match.items()),
            mode=mode,
            threshold=threshold,
            attributes=self._attributes(policy.label, policy.channel or self._config.default_channel),
            root_trace_state=_root_state(threshold),
        )

    @staticmethod
    def _attributes(policy_name: str, channel: str) -> Mapping[str, str]:
        return MappingProxyType({attr.SAMPLING_POLICY: policy_name, attr.SAMPLING_CHANNEL: channel})


def _checked_remote_state(state: TraceState, trace_id: int) -> TraceState:
    """A remote sampled parent's tracestate, with ``th`` erased if it contradicts ``R >= T``.

    The spec asks parent-based samplers to erase an apparently inconsistent threshold rather than
    propagate a wrong adjusted count.
    """
    fields = consistent.ot_fields(state)
    if consistent.THRESHOLD_KEY not in fields:
        return state
    threshold = consistent.threshold_of(fields)
    if threshold is not None and consistent.randomness_of(trace_id, fields) >= threshold:
        return state
    return consistent.with_threshold(state, None)
