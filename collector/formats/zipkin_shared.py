"""The server half of a shared Zipkin span ID gets a span ID of its own, as Jaeger's query service gives it.

Zipkin's B3 propagation let an RPC server report its span under the client's span ID (`shared: true` on
the server half). OTLP, Hotspan's storage and every tree builder key a span by its ID, so both halves under
one ID make the server half's children ambiguous. Jaeger solves it in its query service (the span ID
deduper adjuster, `model/adjuster/span_id_deduper.go` in jaegertracing/jaeger): the server half gets a new
span ID with the client half as its parent, and the children of the shared ID move under the new ID.
Hotspan does this on import, with two differences on purpose:

- **The new ID is derived, not counted**: the first 16 hex digits of the SHA-256 of
  `<traceId>/<id>/<serviceName>/<ipv4>/<ipv6>/<port>` (the server half's local endpoint; a missing field
  is empty text, a missing port too), so importing the same file twice gives the same IDs. Should that ID
  be zero or already used in the trace, the text with `/1`, `/2`, ... appended is hashed instead. Jaeger
  counts up from the largest ID in the trace, which depends on everything else in it.
- **Only the server side's children move**: a span whose `parentId` is the shared ID moves under a server
  half when its local service is that half's and their local endpoints do not conflict (no field set on
  both with different values) and exactly one server half of that ID qualifies. Others (the client side's
  own children, spans of another service, a span that could belong to several server halves, as when
  several Kafka consumers answer one producer's ID) keep the client half as parent. Jaeger moves every child.

A server half is split off only when the same ID has a record of another side that will be stored (one
with a timestamp); a shared span whose client half was never reported keeps its ID. The split half keeps
`shared` and records the ID it was reported under in `original_span_id`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace

from collector.formats.zipkin_merge import Endpoint, Record

_ID_DIGITS = 16


def split_shared(spans: Iterable[Record]) -> list[Record]:
    """`spans` (merged records, see `zipkin_merge`) with each stored-beside-its-client server half moved
    to a derived span ID and its server-side children re-parented (module docstring); order kept."""
    spans = list(spans)
    used = {(span.trace_id, span.span_id) for span in spans}
    clients = {(span.trace_id, span.span_id) for span in spans if not span.shared and span.start_ns is not None}
    result: list[Record] = []
    halves: dict[tuple[str, str], list[Record]] = {}
    for span in spans:
        key = (span.trace_id, span.span_id)
        if span.shared and key in clients:
            new_id = derived_span_id(span.trace_id, span.span_id, span.local, used)
            used.add((span.trace_id, new_id))
            span = replace(span, span_id=new_id, parent_id=span.span_id, original_span_id=span.span_id)
            halves.setdefault(key, []).append(span)
        result.append(span)
    return [_reparented(span, halves) for span in result]


def derived_span_id(trace_id: str, span_id: str, local: Endpoint, used: set[tuple[str, str]]) -> str:
    """The span ID for the server half of `span_id` whose local endpoint is `local`: 16 lowercase hex digits
    derived as the module docstring says, not zero and not in `used` ((trace_id, span_id) pairs)."""
    text = "/".join([trace_id, span_id, *("" if value is None else str(value) for value in local.fields())])
    attempt = 0
    while True:
        salted = text if attempt == 0 else f"{text}/{attempt}"
        candidate = hashlib.sha256(salted.encode()).hexdigest()[:_ID_DIGITS]
        if int(candidate, 16) and (trace_id, candidate) not in used:
            return candidate
        attempt += 1


def _reparented(span: Record, halves: dict[tuple[str, str], list[Record]]) -> Record:
    if span.original_span_id is not None or span.parent_id is None or span.local.service is None:
        return span
    candidates = [
        half
        for half in halves.get((span.trace_id, span.parent_id), [])
        if half.local.service == span.local.service and not half.local.conflicts(span.local)
    ]
    return replace(span, parent_id=candidates[0].span_id) if len(candidates) == 1 else span
