"""Trace views read once and kept: the trace page reads a trace when it loads, and every later request of that
page (a scroll, a collapse, a span's detail, the flame graph) reads the kept view, never storage. A page load
asks the store whether the trace changed since its view was built (``TraceReader.trace_state``: its spans and
stored rows, counted without reading them) and reads it again only then, so reopening or reloading an unchanged
trace costs one small query, not the read and the analysis.

Kept per (tenant, trace ID), least recently used first out, bounded by the spans held
(:data:`DEFAULT_MAX_SPANS_HELD`; a view costs some hundred bytes per span) and by a count of views.

A read is bounded too, and is the trace APIs' one bounded read (:func:`query.bounded_trace.read_bounded_trace`): a
trace of more spans than ``max_read_spans`` (``HOTSPAN_MAX_TRACE_SPANS``, the bound of the trace pipeline and of the
trace APIs' pages) is read as its first that many spans by start (which costs memory for those only), and its view
says how many the store holds
(:attr:`query.trace_model.TraceView.stored_spans`) and its operations summed over the whole trace in the store
(``TraceReader.trace_operations``, :attr:`query.trace_model.TraceView.operations`); the whole trace is never held.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from analysis.stage_rules import StageRules, load_stage_rules
from query.bounded_trace import read_bounded_trace
from query.trace_model import TraceView, build_trace_view
from storage.ids import PADDING_64
from storage.reader import MAX_TRACE_SPANS, TraceReader

DEFAULT_MAX_SPANS_HELD = 2_000_000
"""Spans the kept views may hold together; the view just built is kept even when it alone is larger."""
DEFAULT_MAX_VIEWS = 32
"""Views kept at most."""

Key = tuple[str | None, str]

SHORT_ID = re.compile(r"[0-9a-f]{8,31}")
"""A trace ID prefix worth looking up: 8 hex characters (Hotspan's example links) up to one short of whole."""


class TraceViews:
    """Builds :class:`~query.trace_model.TraceView` objects from a reader and keeps them (module docstring).

    Thread-safe: concurrent requests for one trace that is not kept wait for one build instead of each reading
    the trace.

    Args:
        reader: where spans come from.
        rules: the stage rules every view is analysed with (the pipeline's, so the trace page and the Stages
            page agree); default the packaged table, read once here.
        max_spans_held, max_views: the bounds on what is kept (module docstring).
        max_read_spans: the bound on one read (module docstring).
    """

    def __init__(
        self,
        reader: TraceReader,
        rules: StageRules | None = None,
        *,
        max_spans_held: int = DEFAULT_MAX_SPANS_HELD,
        max_views: int = DEFAULT_MAX_VIEWS,
        max_read_spans: int = MAX_TRACE_SPANS,
    ) -> None:
        self._reader = reader
        self.rules = rules if rules is not None else load_stage_rules()
        self._max_spans = max_spans_held
        self._max_views = max_views
        self._max_read = max_read_spans
        self._kept: OrderedDict[Key, TraceView] = OrderedDict()
        self._states: dict[Key, tuple[int, int, int]] = {}
        self._building: dict[Key, threading.Lock] = {}
        self._lock = threading.Lock()

    def load(self, trace_id: str, *, tenant: str | None) -> TraceView | None:
        """The view of ``trace_id`` (canonical 32 hex) as stored now: the kept one when the trace has not changed
        since it was built, else read now and kept, replacing it (module docstring). None when the tenant has no
        span of it.

        Raises:
            storage.clickhouse.StorageError: the read failed.
            ValueError: the stored spans break the span-frame contract.
        """
        return self._build((tenant, trace_id), fresh=True)

    def ids_starting(self, text: str, *, tenant: str | None, limit: int = 10) -> list[str]:
        """The tenant's trace IDs that start with ``text`` when it is 8 to 31 hex characters (a short ID a page
        showed, such as the 16-character prefix in Jaeger's and Hotspan's lists), and the 64-bit IDs whose digits
        after the zero padding do (how Hotspan and Jaeger show those); ``[]`` for anything else.

        Raises:
            storage.clickhouse.StorageError: the read failed.
        """
        prefix = text.strip().lower()
        if not SHORT_ID.fullmatch(prefix):
            return []
        found = self._reader.trace_ids_with_prefix(prefix, tenant=tenant, limit=limit)
        if len(prefix) <= len(PADDING_64):
            # A 64-bit ID is shown without its zero padding (storage.ids.short_trace_id): its short form is a
            # prefix of the digits after the padding.
            padded = self._reader.trace_ids_with_prefix(PADDING_64 + prefix, tenant=tenant, limit=limit)
            found = sorted({*found, *padded})[:limit]
        return found

    def get(self, trace_id: str, *, tenant: str | None) -> TraceView | None:
        """The kept view of ``trace_id``, read and kept first when it is not (evicted, or another process
        served the page load). Raises like :meth:`load`."""
        key = (tenant, trace_id)
        with self._lock:
            view = self._kept.get(key)
            if view is not None:
                self._kept.move_to_end(key)
                return view
        return self._build(key, fresh=False)

    def _build(self, key: Key, *, fresh: bool) -> TraceView | None:
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        with building:
            if not fresh:
                with self._lock:
                    if (view := self._kept.get(key)) is not None:
                        return view
            tenant, trace_id = key
            state = self._reader.trace_state(trace_id, tenant=tenant)
            with self._lock:
                kept = self._kept.get(key)
                if kept is not None and self._states.get(key) == state:
                    self._building.pop(key, None)
                    self._kept.move_to_end(key)
                    return kept
            # The trace state counted the spans already: the bounded read need not count them again.
            spans = read_bounded_trace(
                self._reader, trace_id, tenant=tenant, limit=self._max_read, span_count=state[0]
            ).spans
            # A trace read in part is still summed whole, by operation, in the store.
            operations = self._reader.trace_operations(trace_id, tenant=tenant) if state[0] > self._max_read else None
            view = (
                build_trace_view(trace_id, spans, self.rules, stored_spans=state[0], operations=operations)
                if spans.height
                else None
            )
            with self._lock:
                self._building.pop(key, None)
                self._kept.pop(key, None)
                self._states.pop(key, None)
                if view is not None:
                    self._kept[key] = view
                    self._states[key] = state
                    self._evict(keep=key)
            return view

    def _evict(self, keep: Key) -> None:
        """Drop least recently used views beyond the bounds, never ``keep`` (call under the lock)."""
        held = sum(view.size for view in self._kept.values())
        for key in list(self._kept):
            if held <= self._max_spans and len(self._kept) <= self._max_views:
                break
            if key != keep:
                held -= self._kept.pop(key).size
                self._states.pop(key, None)
