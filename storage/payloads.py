"""Deleting the message payloads of stored traces on request: what a user who must forget a conversation asks for.

A payload is what an instrumentation recorded of the conversation itself: the span attributes whose keys the
redaction table names (``gen_ai.input.messages``, ``llm.input_messages.*`` ...) and every attribute of the span
events it names (the deprecated GenAI message events). Deleting them rewrites the spans of the traces in place
(a ClickHouse mutation, ``ALTER TABLE ... UPDATE``, waited for on every replica: ``mutations_sync = 2``): those
attributes are removed, the event attributes emptied (the events themselves, their names and times, stay), and the
span gets :data:`DELETED_KEY`. Timings, tokens, stages and every rollup are untouched. The mutation gives the
rewritten parts a new data version, which :data:`storage.trace_sql.TRACE_STATE` includes, so no trace page keeps
showing a deleted message from a view it read before.

The patterns are RE2 expressions matched against whole keys and event names; the caller derives them from the
redaction table (``collector.redaction.Redactor.key_regex`` / ``event_regex``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from storage.clickhouse import ClickHouse
from storage.layout import mutation_statement
from storage.tenancy import tenant_parameters
from storage.trace_sql import TENANT_FILTER

DELETED_KEY = "hotspan.payload_deleted"
"""Span attribute set (``"true"``) on a span whose payloads were deleted."""

_HOLDS_PAYLOAD = """(
    arrayExists(key -> match(key, {keys:String}), mapKeys(SpanAttributes))
    OR arrayExists(
        (name, attributes) -> match(name, {events:String}) AND length(attributes) > 0
            OR arrayExists(key -> match(key, {keys:String}), mapKeys(attributes)),
        `Events.Name`, `Events.Attributes`
    )
)"""

_WHERE = f"""TraceId IN {{trace_ids:Array(String)}}
  AND {TENANT_FILTER}
  AND {_HOLDS_PAYLOAD}"""

COUNT_PAYLOAD_SPANS = f"SELECT count() FROM otel_traces WHERE {_WHERE}"
"""Stored rows of ``trace_ids`` (the caller's tenancy) that hold a payload."""

ERASE_PAYLOADS = f"""
ALTER TABLE otel_traces UPDATE
    SpanAttributes = mapUpdate(
        mapFilter((key, value) -> NOT match(key, {{keys:String}}), SpanAttributes),
        map('{DELETED_KEY}', 'true')
    ),
    `Events.Attributes` = arrayMap(
        (name, attributes) -> if(
            match(name, {{events:String}}),
            map(),
            mapFilter((key, value) -> NOT match(key, {{keys:String}}), attributes)
        ),
        `Events.Name`, `Events.Attributes`
    )
WHERE {_WHERE}
SETTINGS mutations_sync = 2
"""
"""Remove the payloads of ``trace_ids`` (module docstring)."""


class PayloadStore(Protocol):
    """Deletes stored message payloads (module docstring)."""

    def delete_payloads(self, trace_ids: Sequence[str], *, tenant: str | None) -> int:
        """Delete the payloads of ``trace_ids`` (normalized 32-hex IDs) of ``tenant`` (``None``: every tenant);
        the stored span rows that held one (0: nothing to delete, or no such trace). Blocks until every replica
        applied it.

        Raises:
            storage.clickhouse.StorageError: ClickHouse refused or failed the mutation.
        """
        ...


class ClickHousePayloadStore:
    """:class:`PayloadStore` on the spans table.

    Args:
        ch: the store.
        key_regex: RE2 expression matching a payload attribute key whole (``^(...)$``).
        event_regex: RE2 expression matching the name of an event whose every attribute is payload
            (``[^\\s\\S]``, which matches nothing, when none is).
    """

    def __init__(self, ch: ClickHouse, key_regex: str, event_regex: str) -> None:
        self._ch = ch
        self._patterns = {"keys": key_regex, "events": event_regex}

    def delete_payloads(self, trace_ids: Sequence[str], *, tenant: str | None) -> int:
        parameters = {"trace_ids": list(trace_ids), **self._patterns, **tenant_parameters(tenant)}
        held = int(self._ch.query_rows(COUNT_PAYLOAD_SPANS, parameters)[0][0])
        if held:
            self._ch.command(mutation_statement(ERASE_PAYLOADS, self._ch.layout), parameters)
        return held
