"""Zipkin v2 records that report one span in pieces, merged into one record as Zipkin itself merges them.

Zipkin lets a tracer report a span in several records with the same `traceId` and `id`: a late record that
only sets a name, tags or annotations, a record written on flush and another on finish. Zipkin's storage
and UI merge them before building a tree (`zipkin2.internal.Trace.merge` and `Span.Builder.merge` in
openzipkin/zipkin; `mergeV2ById` in zipkin-lens's `span-cleaner.js`); this module does the same, so
Hotspan stores the span Zipkin shows. Rules, for the records of one (traceId, id):

1. **Order** (Zipkin's `CLEANUP_COMPARATOR`): records not marked `shared` first, and among them CLIENT
   records first; `shared` (server-side) records last. Then records without a local endpoint first, then by
   local service name, IPv4, IPv6 (a missing field after a present one). Ties keep file order.
2. **Merge** (Zipkin's loop): walking that order, a record joins the record before it when both have the
   same `shared` flag and their local endpoints do not conflict (no field, of service name, IPv4, IPv6 and
   port, set on both with different values). Otherwise it starts a record of its own: a client and a
   server half sharing the ID stay two records.
3. **Shared flag backfill** (Zipkin): a SERVER record right after a CLIENT record of the same ID is the
   server half of a shared span even when the instrumentation forgot `shared: true`; a shared record
   without `parentId` takes the parent of the record before it.
4. **Late fragments** (Hotspan's addition): a record that says neither its side (no `kind`, no `shared`)
   nor could join the record before it, joins the first shared record whose local endpoint does not
   conflict with its own. Brave reports a server span's late rename so (name and local endpoint only, no
   `shared` flag); Zipkin's rule 2 would leave such a record apart, without a timestamp, where its local
   endpoint names the server half it belongs to.

Merging two records (Zipkin's `Span.Builder.merge`; "first" is the earlier record in the order above, or
for rule 4 the shared record):

- `parentId`, `kind`, `name`, `timestamp`, `duration`: the first record's value, else the later one's
  (an empty name and a zero timestamp or duration count as missing, as Zipkin reads them);
- local and remote endpoints: field by field, the first record's value, else the later one's;
- tags: the union; a key set in both with different values takes the **later** record's value (Zipkin
  copies the later record's tags over the first's);
- annotations: the union, sorted by (timestamp, value), exact duplicates dropped;
- `shared`: set when either is.

A record that has no timestamp after merging cannot be placed in time; the converter rejects it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

CLIENT = "CLIENT"
SERVER = "SERVER"


@dataclass(frozen=True)
class Endpoint:
    """A Zipkin endpoint; a field the record does not give is None (a zero port counts as none)."""

    service: str | None = None
    ipv4: str | None = None
    ipv6: str | None = None
    port: int | None = None

    def fields(self) -> tuple[str | int | None, ...]:
        """(service, ipv4, ipv6, port)."""
        return (self.service, self.ipv4, self.ipv6, self.port)

    @property
    def empty(self) -> bool:
        """No field is given (Zipkin reads such an endpoint as absent)."""
        return all(value is None for value in self.fields())

    def conflicts(self, other: Endpoint) -> bool:
        """Some field is given on both sides with different values (Zipkin's `EndpointTracker.tryMerge`)."""
        return any(
            a is not None and b is not None and a != b for a, b in zip(self.fields(), other.fields(), strict=True)
        )

    def filled_from(self, other: Endpoint) -> Endpoint:
        """This endpoint with each missing field taken from `other`."""
        return Endpoint(*(a if a is not None else b for a, b in zip(self.fields(), other.fields(), strict=True)))


class Source(NamedTuple):
    """Where a record came from: its position among the file's records (0-based) and its JSON pointer."""

    position: int
    pointer: str


@dataclass(frozen=True)
class Record:
    """One Zipkin v2 span record, validated, or several records of one span merged.

    IDs are lowercase hex (`trace_id` 32 digits, left-padded; span IDs 16); `parent_id` is None for a root
    (a zero or self-referencing `parentId` included). `kind` is `SERVER`, `CLIENT`, `PRODUCER`, `CONSUMER`
    or None. Times are integer **nanoseconds** (Zipkin's µs × 1000); `start_ns` and `duration_ns` are None
    when missing or zero, as Zipkin reads them. `annotations` are (time ns, value), sorted, without
    duplicates. `sources` are the records this one was built from, in file order. `original_span_id` is set
    on the server half of a shared span that was given a span ID of its own (see `zipkin_shared`).
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    kind: str | None
    name: str | None
    start_ns: int | None
    duration_ns: int | None
    local: Endpoint
    remote: Endpoint
    annotations: tuple[tuple[int, str], ...]
    tags: Mapping[str, str]
    shared: bool
    sources: tuple[Source, ...]
    original_span_id: str | None = field(default=None)


def merge_records(records: Iterable[Record]) -> list[Record]:
    """The records merged per (trace_id, span_id) by the rules in the module docstring, ordered by the file
    position of each result's first record. Records of different spans are returned unchanged."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        groups.setdefault((record.trace_id, record.span_id), []).append(record)
    merged = [span for group in groups.values() for span in _merge_group(group)]
    return sorted(merged, key=lambda span: span.sources[0].position)


def combine(first: Record, later: Record) -> Record:
    """One record from two records of one span: `first`'s values win, `later`'s tags win (module docstring)."""
    return replace(
        first,
        parent_id=first.parent_id or later.parent_id,
        kind=first.kind or later.kind,
        name=first.name or later.name,
        start_ns=first.start_ns or later.start_ns,
        duration_ns=first.duration_ns or later.duration_ns,
        local=first.local.filled_from(later.local),
        remote=first.remote.filled_from(later.remote),
        annotations=tuple(sorted(set(first.annotations) | set(later.annotations))),
        tags={**first.tags, **later.tags},
        shared=first.shared or later.shared,
        sources=tuple(sorted(first.sources + later.sources)),
    )


def _merge_group(group: list[Record]) -> list[Record]:
    spans: list[Record] = []
    for record in sorted(group, key=_merge_order):
        if spans and spans[-1].shared == record.shared and not spans[-1].local.conflicts(record.local):
            spans[-1] = combine(spans[-1], record)
        else:
            spans.append(record)
    return _attach_late_fragments(_backfill_shared(spans))


def _merge_order(record: Record) -> tuple[object, ...]:
    local = record.local
    not_a_client = not record.shared and record.kind != CLIENT
    # Within an endpoint, a missing field sorts after a present one (Zipkin's nullSafeCompareTo).
    fields = [(value is None, value or "") for value in (local.service, local.ipv4, local.ipv6)]
    return (record.shared, not_a_client, not local.empty, *fields)


def _backfill_shared(spans: list[Record]) -> list[Record]:
    result = spans[:1]
    for span in spans[1:]:
        previous = result[-1]
        if previous.kind == CLIENT and span.kind == SERVER and not span.shared:
            span = replace(span, shared=True)
        if span.shared and span.parent_id is None and previous.parent_id is not None:
            span = replace(span, parent_id=previous.parent_id)
        result.append(span)
    return result


def _attach_late_fragments(spans: list[Record]) -> list[Record]:
    shared = [span for span in spans if span.shared]
    kept: list[Record] = []
    for span in spans:
        if span.shared:
            continue
        target = None
        if span.kind is None:
            target = next((i for i, half in enumerate(shared) if not half.local.conflicts(span.local)), None)
        if target is None:
            kept.append(span)
        else:
            shared[target] = combine(shared[target], span)
    return kept + shared
