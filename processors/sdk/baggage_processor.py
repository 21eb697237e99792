"""BaggageSpanProcessor: copy an allow-list of baggage entries onto span attributes at start."""

from collections.abc import Iterable

from opentelemetry import baggage
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Span, SpanProcessor

from hotspan_sdk.baggage_values import entry_value
from hotspan_sdk.config_errors import ConfigError, ConfigIssue


class BaggageSpanProcessor(SpanProcessor):
    """Sets ``attribute_prefix + key`` = baggage value on every started span, for allow-listed keys.

    Makes request-scoped facts such as ``tenant_id`` searchable on every span of every service the
    baggage reaches. Only listed keys are copied: baggage travels across trust boundaries and may hold
    values nobody meant to store. Values are read with :func:`~hotspan_sdk.baggage_values.entry_value`
    (W3C properties dropped; the propagator already percent-decoded them). Absent keys are skipped.

    Register it on the TracerProvider beside (before) the exporting processor; it exports nothing.
    Thread-safe and stateless per span; ``on_end`` and the other hooks do nothing.
    """

    def __init__(self, keys: Iterable[str], *, attribute_prefix: str = "") -> None:
        """Create the processor.

        Args:
            keys: Baggage keys to copy, in order; duplicates are ignored.
            attribute_prefix: Prepended to each key to form the attribute name (e.g. ``"baggage."``).

        Raises:
            ConfigError: A key that is not a non-empty string, or an empty allow-list.
        """
        key_list = list(dict.fromkeys(keys))
        issues = [
            ConfigIssue(f"keys[{i}]", f"must be a non-empty string, got {key!r}")
            for i, key in enumerate(key_list)
            if not isinstance(key, str) or not key
        ]
        if not key_list:
            issues.append(ConfigIssue("keys", "must name at least one baggage key"))
        if issues:
            raise ConfigError("BaggageSpanProcessor config", issues)
        self._pairs: tuple[tuple[str, str], ...] = tuple((key, attribute_prefix + key) for key in key_list)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        # One get_baggage per key rather than get_all: get_all wraps the entries in a new mapping proxy
        # on every span, and allow-lists are short.
        for key, name in self._pairs:
            value = baggage.get_baggage(key, parent_context)
            if value is not None:
                if value.__class__ is not str or ";" in value:  # skip the call in the common case
                    value = entry_value(value)
                # Straight into the span's BoundedAttributes, which validates, truncates and counts
                # against the limits as set_attribute would: set_attribute only adds a lock and an
                # ended-span check, needless at start, and costs a quarter more. The SDK internals read
                # here are pinned by tests/processors/sdk/test_sdk_internals.py.
                span._attributes[name] = value
