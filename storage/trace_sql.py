"""SQL for the ``otel_traces`` family, in one place. Every value is a bound ``{name:Type}`` parameter.

Readers accept both spellings the exporter has written over time: ``Server``/``Ok`` and the older
``SPAN_KIND_SERVER``/``STATUS_CODE_OK``; the expressions below fold them to the new one.

Every read of ``otel_traces`` carries :data:`TENANT_FILTER`, bound by
:func:`storage.tenancy.tenant_parameters`: each ``FROM otel_traces`` of a query has its own, so spans another
tenant stored under the same trace ID never join in (``tests/security`` checks every query here).

Every read counts a span once, before and after background merges: a span may have several stored copies
(rows with the same :data:`IDENTITY`: written by a sender that exported it again, more complete, or by an OTel
Collector that retried), and readers keep the one with the highest ``Version`` (migration 0031,
:class:`storage.writer.OnceWriter`). Full-span reads sort the copies of a span latest ``Version`` first and keep
the first (``ORDER BY ..., Version DESC LIMIT 1 BY`` :data:`IDENTITY`, :data:`TRACE_SPANS`): one scan of the rows,
which a subquery of each identity's highest ``Version`` would find a second time; copies with equal identity and
Version (an OTel Collector's retries, all Version 0) keep either. Aggregates group by :data:`IDENTITY` with
``argMax(..., Version)``, or aggregate such a sorted and limited read (:data:`TRACE_OPERATIONS`).

Every read of traces by their IDs (one trace, a batch, the traces a search finds: :data:`IN_MATCHED`) is bounded to
the traces' time range (:func:`in_time_range_of`), from the ``otel_traces_trace_id_ts`` lookup table:
``otel_traces`` is partitioned by day and sorted by service, span name and time, so a trace ID alone is found by the
trace-ID bloom filter of every granule of every day.
"""

from __future__ import annotations

from storage.schema import STORED_SCHEMA
from storage.tenancy import DEFAULT_TENANT, tenant_condition

KIND = "initcap(replaceRegexpOne(SpanKind, '^SPAN_KIND_', ''))"
STATUS = "initcap(replaceRegexpOne(StatusCode, '^STATUS_CODE_', ''))"
START_NS = "toUnixTimestamp64Nano(Timestamp)"
HOTSPOT = "SpanAttributes['hotspan.hotspot'] = 'true'"
"""A span flagged by Hotspan's SDK ``HotspotSpanProcessor`` (``hotspan_sdk``)."""

TENANT = f"if(Tenant = '', '{DEFAULT_TENANT}', Tenant)"
"""A span's tenant: ``Tenant``, with ``''`` (rows written before migration 0030 or by an OTel Collector) read as
the default tenant."""

TENANT_FILTER = tenant_condition(TENANT)
"""The tenant condition of every read: the caller's tenant only, or every tenant for an admin
(``all_tenants``); parameters from :func:`storage.tenancy.tenant_parameters`. Holds bound-parameter braces:
insert it into ``str.format`` templates as a field value, never as template text."""

IDENTITY = f"{TENANT}, TraceId, SpanId, SpanKind, SpanName, Timestamp"
"""What makes two rows copies of one span: tenant, trace and span ID, kind, name and start. Kind, name and start
belong to it because real data reuses span IDs for different spans (Zipkin's shared client/server halves,
several receives of one message under one ID, renamed spans in Jaeger's fixtures); the per-request rule of
:func:`collector.batch.check_request` uses the same key. A re-export that renames a span or moves its start is
therefore a second span."""

CONTENT = (
    "cityHash64(ParentSpanId, TraceState, ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes,"
    " Duration, StatusCode, StatusMessage, `Events.Timestamp`, `Events.Name`, `Events.Attributes`, `Links.TraceId`,"
    " `Links.SpanId`, `Links.TraceState`, `Links.Attributes`)"
)
"""A hash of everything a copy of a span holds beyond its :data:`IDENTITY`: two copies with equal identity and
content are the same export repeated (a retry), stored once."""

INCOMING = "hotspan_incoming"
"""Temporary table (per ClickHouse session) a batch is loaded into before its checked insert."""

ROW_COLUMNS = ", ".join(f"`{name}`" for name in STORED_SCHEMA.names)
"""The columns a writer fills (:data:`storage.schema.STORED_SCHEMA`), quoted: the ``Nested`` ones have dots."""

STORED_COLUMNS = f"{ROW_COLUMNS}, Version"
"""Every stored column of ``otel_traces`` (ALIAS columns aside)."""

CREATE_INCOMING = f"CREATE TEMPORARY TABLE IF NOT EXISTS {INCOMING} AS otel_traces ENGINE = Memory"
EMPTY_INCOMING = f"TRUNCATE TABLE {INCOMING}"

_POSITIONED = f"(SELECT *, rowNumberInAllBlocks() AS Position FROM {INCOMING})"
"""The rows of :data:`INCOMING` numbered in arrival order; every statement reading it runs on one thread
(``max_threads = 1``), which reads the blocks in the order they were inserted, so the numbers agree."""

CHECK_INCOMING = f"""
SELECT Position, if(Known OR Copy > 1, {{version:UInt64}} + Position, 0) AS Version
FROM (
    SELECT Position, Known, row_number() OVER (PARTITION BY Identity ORDER BY Position) AS Copy
    FROM (
        SELECT incoming.Position AS Position, Identity, incoming.Content AS Content,
            notEmpty(stored.Contents) AS Known, has(stored.Contents, incoming.Content) AS Repeat
        FROM (
            SELECT Position, tuple({IDENTITY}) AS Identity, {CONTENT} AS Content FROM {_POSITIONED}
        ) AS incoming
        LEFT JOIN (
            SELECT tuple({IDENTITY}) AS Identity, groupArray({CONTENT}) AS Contents
            FROM otel_traces
            WHERE TraceId GLOBAL IN (SELECT TraceId FROM {INCOMING})
              AND Timestamp GLOBAL IN (SELECT Timestamp FROM {INCOMING})
              AND Timestamp >= (SELECT min(Timestamp) FROM {INCOMING})
              AND Timestamp <= (SELECT max(Timestamp) FROM {INCOMING})
            GROUP BY Identity
        ) AS stored USING Identity
        WHERE NOT Repeat
        ORDER BY Position
        LIMIT 1 BY Identity, Content
    )
)
ORDER BY Position
SETTINGS max_threads = 1
"""
"""The check of :class:`storage.writer.OnceWriter`, reading only identities and content hashes: of the rows in
:data:`INCOMING` (in arrival order), those whose copy is neither stored (same identity and content) nor earlier in
the batch, each with its ``Version``: 0 for a span's first copy (identity neither stored nor earlier in the
batch), else ``version`` plus its position. Stored rows are looked up by the batch's trace IDs and its spans' exact
starts (the identity holds the start, and the start is in the sorting key, so the lookup reads only the granules
holding those instants, however many spans the store holds around them)."""

DAYS_FILTER = "(empty({days:Array(Date)}) OR has({days:Array(Date)}, toDate(Timestamp)))"
"""Rows of the ``days`` given, or every row when none is given: an insert may touch at most
``max_partitions_per_insert_block`` partitions (``storage.partitions``)."""

MOVE_ALL = f"""
INSERT INTO otel_traces ({STORED_COLUMNS}) SELECT {ROW_COLUMNS}, 0 FROM {INCOMING} WHERE {DAYS_FILTER}
"""
"""Store every row of :data:`INCOMING` (of ``days``) as a first copy (the check kept all, all with Version 0)."""

MOVE_KEPT = f"""
INSERT INTO otel_traces ({STORED_COLUMNS})
SELECT {ROW_COLUMNS}, transform(Position, {{positions:Array(UInt64)}}, {{versions:Array(UInt64)}}, 0)
FROM {_POSITIONED}
WHERE Position IN {{positions:Array(UInt64)}} AND {DAYS_FILTER}
SETTINGS max_threads = 1
"""
"""Store the rows of :data:`INCOMING` at ``positions`` (of ``days``) with ``versions`` (what :data:`CHECK_INCOMING`
kept)."""

STAGED = f"SELECT count(), uniqExact(toDate(Timestamp)) FROM {INCOMING}"
"""Rows in :data:`INCOMING` and the partitions (days) they fall in."""

STAGED_DAYS = f"SELECT DISTINCT toDate(Timestamp) AS day FROM {INCOMING} ORDER BY day"

SERVICES = f"SELECT DISTINCT ServiceName FROM otel_traces WHERE {TENANT_FILTER} ORDER BY ServiceName"

OPERATIONS = f"""
SELECT SpanName AS name, {KIND} AS span_kind
FROM otel_traces
WHERE ServiceName = {{service:String}} AND {TENANT_FILTER}
GROUP BY name, span_kind
ORDER BY name, span_kind
"""

SPAN_COLUMNS = f"""
    TraceId AS trace_id,
    SpanId AS span_id,
    ParentSpanId AS parent_span_id,
    SpanName AS name,
    ServiceName AS service_name,
    {KIND} AS kind,
    {START_NS} AS start_time_unix_nano,
    toInt64({START_NS} + Duration) AS end_time_unix_nano,
    Duration AS duration_ns,
    {STATUS} AS status_code,
    StatusMessage AS status_message,
    TraceState AS trace_state,
    ScopeName AS scope_name,
    ScopeVersion AS scope_version,
    SpanAttributes AS attributes,
    ResourceAttributes AS resource_attributes,
    arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp) AS event_times_unix_nano,
    Events.Name AS event_names,
    Events.Attributes AS event_attributes,
    Links.TraceId AS link_trace_ids,
    Links.SpanId AS link_span_ids,
    Links.TraceState AS link_trace_states,
    Links.Attributes AS link_attributes"""
"""The span columns every full-span read returns (see ``TraceReader.trace``); holds no braces, so the
queries that embed it can still be ``str.format``-ed."""

LAST_SECOND = "toDateTime(4294967295)"
"""The latest ``DateTime`` (2106-02-07 06:28:15 UTC): a later ``DateTime64`` start is stored as it in the lookup
table's ``Start``/``End`` (an insert saturates), while ``toDateTime`` wraps it around (2200 reads as 2063)."""


def in_time_range_of(trace_ids: str, *, global_in: bool = False) -> str:
    """A condition on ``otel_traces`` rows: the row lies within the time range of the traces ``trace_ids`` (an SQL
    array of trace IDs, a bound parameter such as ``{trace_ids:Array(String)}``, or a subquery of them), in whole
    seconds, from ``otel_traces_trace_id_ts``; no bound at all when none of them has a lookup row or one has a span
    after :data:`LAST_SECOND`. A read of traces by ID adds it to its ``TraceId`` condition. ``global_in`` looks the
    IDs up with ``GLOBAL IN``: a subquery then runs once, on the node that received the query, and its rows go to
    the shards with the lookup's read (on a cluster the lookup table is ``Distributed``; :data:`IN_MATCHED`).

    Why: ``otel_traces`` is partitioned by day and sorted by (service, span name, second), so a trace ID alone is
    found by the trace-ID bloom filter of every granule of every day kept (8192 rows a granule, about 15 KB of filter
    each). Within the range ClickHouse reads only the parts of the trace's days (the time column's min-max index),
    and in them skips the granules of other seconds wherever one (service, span name) run spans several granules;
    the bloom filter then picks among the rest. At 10M spans over 24 hours, across two dates (200 such runs of about 4
    granules a date): 357 granules are left to the filter, of the 1224 it checks by the ID alone, the other date's
    part skipped whole (benchmarks/README.md); each further day kept adds none.

    Why it keeps every span: the materialized view ``otel_traces_trace_id_ts_mv`` adds a row (TraceId, min and max
    start of the trace's spans in that insert, truncated to the second) on every insert into ``otel_traces``, the
    insert that stores the span, so a trace's rows together cover all its stored spans (every tenant's and every
    copy's: the lookup has no tenant, so the range of a trace ID several tenants use covers them all, and a late span
    widens it with a row of its own). The bounds compare ``toDateTime(Timestamp)`` (seconds, the sorting key's own
    expression: the same truncation the view applied; ``Timestamp`` against a ``DateTime`` misses rows in ClickHouse's
    key analysis). A trace without a lookup row (an ID not stored, or rows an OpenTelemetry Collector wrote into a
    table without the view) or with a span after :data:`LAST_SECOND` is read unbounded, as before; so are several
    traces none of which has one (a trace among several without one is bounded by the others' range). What it does
    not cover: a span whose insert has stored it but not yet its lookup row (the view's part is committed just after
    the span's) is missed by a read in that instant, as it would be by a read just before; and near the TTL the lookup
    partition (by week of ``Start``) can be dropped before the last day of a trace that crosses a week.

    Costs one read of the lookup table by its primary key (a granule per trace at most: 18 for the 1 h search's 20
    traces) per query: the bounds are one scalar subquery, which ClickHouse runs once however often the query
    repeats it.
    """
    bounds = (
        f"(SELECT if(count() = 0 OR max(End) >= {LAST_SECOND}, (toDateTime(0), {LAST_SECOND}), (min(Start), max(End)))"
        f" FROM otel_traces_trace_id_ts WHERE TraceId {'GLOBAL IN' if global_in else 'IN'} {trace_ids})"
    )
    return f"toDateTime(Timestamp) >= {bounds}.1\n  AND toDateTime(Timestamp) <= {bounds}.2"


TRACE_WHERE = f"TraceId = {{trace_id:String}} AND {TENANT_FILTER} AND {in_time_range_of('[{trace_id:String}]')}"
"""The rows of one trace (``trace_id``) of the reader's tenant, within the trace's time range
(:func:`in_time_range_of`): every read of one trace by its ID uses it."""

TRACES_WHERE = f"""TraceId IN {{trace_ids:Array(String)}}
  AND {TENANT_FILTER}
  AND {in_time_range_of("{trace_ids:Array(String)}")}"""
"""The rows of the traces ``trace_ids`` (``Array(String)``) of the reader's tenant, within their time range
(:func:`in_time_range_of`): :data:`TRACE_WHERE` for many traces at once."""

TRACE_SPANS = f"""
SELECT{SPAN_COLUMNS}
FROM otel_traces
WHERE {TRACE_WHERE}
ORDER BY start_time_unix_nano, span_id, kind, name, Version DESC
LIMIT 1 BY {IDENTITY}
"""
"""Every span of one trace, each once (its latest copy), ordered by start, then span ID. One scan of the trace: the
copies of a span share its start, span ID, kind and name, so the sort puts its latest copy first among them and
``LIMIT 1 BY`` keeps that one (a subquery of each identity's highest ``Version`` would find the trace a second
time, for the same rows; copies with equal identity and Version, an OTel Collector's retries, keep either)."""

TRACE_OPERATIONS = f"""
SELECT ServiceName AS service_name, SpanName AS name, count() AS span_count,
    sum(Duration) AS duration_ns_sum, max(Duration) AS duration_ns_max,
    countIf({STATUS} = 'Error') AS error_count,
    toUnixTimestamp64Nano(min(Timestamp)) AS first_start_ns
FROM (
    SELECT ServiceName, SpanName, Duration, StatusCode, Timestamp
    FROM otel_traces
    WHERE {TRACE_WHERE}
    ORDER BY Version DESC
    LIMIT 1 BY {IDENTITY}
)
GROUP BY service_name, name
ORDER BY duration_ns_sum DESC, service_name, name
LIMIT {{limit:UInt64}}
"""
"""One trace's spans (each once, its latest copy) grouped by (service, span name), the most time first: the whole
trace summed in ClickHouse, where the trace is too large to read (``TraceReader.trace_operations``). One scan: the
inner read sorts the trace's rows latest ``Version`` first and ``LIMIT 1 BY`` keeps each span's first, which on a
trace of 1M spans (and 100k later copies) took half the CPU of ``argMax`` per identity and under a quarter of a
subquery of each identity's highest ``Version`` (benchmarks/README.md)."""

_SPAN_ORDER = f"Timestamp, SpanId, SpanKind, SpanName, {TENANT}"
"""The order of a trace's spans that pages follow (an identity in another order: one row per span, not per copy)."""

AFTER = (
    f"({{first:Bool}} OR ({_SPAN_ORDER}) > (fromUnixTimestamp64Nano({{after_ns:Int64}}), {{after_span:String}},"
    " {after_kind:String}, {after_name:String}, {after_owner:String}))"
)
"""Rows after a page's last span in :data:`_SPAN_ORDER` (every row for the first page, ``first``)."""

TRACE_PAGE = f"""
WITH page AS (
    SELECT {IDENTITY}, max(Version)
    FROM (
        SELECT Tenant, TraceId, SpanId, SpanKind, SpanName, Timestamp, Version
        FROM otel_traces
        WHERE {TRACE_WHERE} AND {AFTER}
        ORDER BY {_SPAN_ORDER}, Version DESC
        LIMIT {{scan:UInt64}}
    )
    GROUP BY {IDENTITY}
    ORDER BY {_SPAN_ORDER}
    LIMIT {{limit:UInt64}}
)
SELECT{SPAN_COLUMNS},
    SpanKind AS stored_kind,
    {TENANT} AS owner
FROM otel_traces
WHERE {TRACE_WHERE} AND ({IDENTITY}, Version) IN page
ORDER BY start_time_unix_nano, span_id, stored_kind, name, owner
LIMIT 1 BY {IDENTITY}
"""
"""A page of a trace: its first ``limit`` spans after the cursor (``first`` / ``after_*``, :data:`AFTER`), each once,
with the columns of :data:`TRACE_SPANS` plus ``stored_kind`` and ``owner`` (what the next cursor needs). Memory
follows the page, not the trace: the narrow scan keeps its first ``scan`` rows in order (``ORDER BY ... LIMIT``
keeps a bounded heap), copies of one span sort together with the latest first, and only the page's rows are then
read whole. A page of many copies may hold fewer than ``limit`` spans; the next one goes on after it."""

TRACE_HAS_MORE = f"SELECT count() > 0 FROM (SELECT 1 FROM otel_traces WHERE {TRACE_WHERE} AND {AFTER} LIMIT 1)"
"""Whether the trace has a span after the cursor."""

TRACE_ID_PREFIX_CANDIDATES = """
SELECT DISTINCT TraceId FROM otel_traces_trace_id_ts
WHERE startsWith(TraceId, {prefix:String})
ORDER BY TraceId
LIMIT {scan:UInt32}
"""
"""Stored trace IDs that start with ``prefix`` (lowercase hex), every tenant's: a range read of the lookup
table's primary key. :data:`OWNED_TRACE_IDS` then keeps the reader's own."""

OWNED_TRACE_IDS = f"""
SELECT DISTINCT TraceId FROM otel_traces
WHERE TraceId IN {{trace_ids:Array(String)}} AND {TENANT_FILTER}
ORDER BY TraceId
"""
"""Which of ``trace_ids`` the reader's tenant has spans of."""

TRACE_SIZE = f"SELECT uniqExact(cityHash64({IDENTITY})) FROM otel_traces WHERE {TRACE_WHERE}"
"""How many spans one trace has (each counted once; 8 bytes of memory per span)."""

TRACE_SIZES = (
    f"SELECT TraceId, uniqExact(cityHash64({IDENTITY})) FROM otel_traces WHERE {TRACES_WHERE} GROUP BY TraceId"
)
"""How many spans each of many traces (``trace_ids``) has, each span counted once: :data:`TRACE_SIZE` in one read;
unknown IDs give no row."""

TRACE_STATE = (
    f"SELECT uniqExact(cityHash64({IDENTITY})), count(), max(_part_data_version) FROM otel_traces WHERE {TRACE_WHERE}"
)
"""One trace's spans (each counted once), stored rows (every copy) and the newest data version of the parts holding
them: any write to the trace (a late span, a re-sent copy), removal, or rewrite in place (a payload deletion,
``storage.payloads``; a merge too, which costs one needless read) changes the triple."""

SEARCH_SPAN_FILTERS = {
    "service": "ServiceName = {service:String}",
    "operation": "SpanName = {operation:String}",
    "start_ns": "Timestamp >= fromUnixTimestamp64Nano({start_ns:Int64})",
    "end_ns": "Timestamp <= fromUnixTimestamp64Nano({end_ns:Int64})",
    "min_duration_ns": "Duration >= {min_duration_ns:UInt64}",
    "max_duration_ns": "Duration <= {max_duration_ns:UInt64}",
    "status_code": f"{STATUS} = {{status_code:String}}",
    "span_kind": f"{KIND} = {{span_kind:String}}",
    "hotspot": f"({HOTSPOT}) = {{hotspot:Bool}}",
}
"""Span-level conditions of a trace search, by parameter name; only those whose parameter is set apply."""

ATTRIBUTE_FILTER = (
    "(SpanAttributes[{{attr_key_{i}:String}}] = {{attr_value_{i}:String}}"
    " OR ResourceAttributes[{{attr_key_{i}:String}}] = {{attr_value_{i}:String}})"
)
"""One ``key=value`` condition, matched against span or resource attributes; ``{i}`` numbers it."""

MATCHED_TRACES = """
WITH matched AS (
    SELECT TraceId, max(Timestamp) AS last_seen
    FROM otel_traces
    WHERE {tenant} AND {conditions}
    GROUP BY TraceId
    ORDER BY last_seen DESC, TraceId
    LIMIT {{limit:UInt32}}
)"""
"""The traces a search finds: those with a span meeting ``{conditions}``, the most recently active first, at
most ``{limit:UInt32}`` of them. A template: the builder fills ``{conditions}`` and ``{tenant}`` (with
:data:`TENANT_FILTER`) by ``str.format``."""

MATCHED_IDS = """,
(SELECT groupArray(TraceId) FROM matched) AS matched_ids"""
"""The IDs of the ``matched`` traces (:data:`MATCHED_TRACES`, :data:`RANKED_TRACES`) as one array, a scalar added to
their ``WITH``: ClickHouse runs ``matched`` once for it however often the query uses it (:data:`IN_MATCHED` twice),
where each ``SELECT ... FROM matched`` would run the search's span scan again."""

_MATCHED_SET = "(SELECT arrayJoin(matched_ids))"

IN_MATCHED = f"""PREWHERE TraceId GLOBAL IN {_MATCHED_SET}
      AND {in_time_range_of(_MATCHED_SET, global_in=True)}"""
"""The ``PREWHERE`` of a read of the ``matched`` traces' rows (with :data:`MATCHED_IDS`): their trace IDs, as a set
(``GLOBAL IN``: built once and sent to the shards on a cluster), within their time range (:func:`in_time_range_of`,
as every read of traces by ID). The range leaves the bloom filter only the granules of the traces' seconds (at
10M spans a day, the 1 h search's 20 traces: 307 of 1,224) and skips every part of other days. ``PREWHERE``, because
ClickHouse moves neither condition there itself (it moved only the tenant's): the wide columns, ``SpanAttributes``
above all, are read only for the rows of those traces, not for the whole granules they sit in (benchmarks/README.md,
"The search bounded by its traces' time range")."""

RANKED_TRACES = f"""
WITH matched AS (
    SELECT traces.TraceId AS TraceId
    FROM (
        SELECT
            TraceId,
            max(Timestamp) AS last_seen,
            min(Timestamp) AS first_start,
            toInt64(max({START_NS} + Duration)) - toInt64(min({START_NS})) AS trace_ns,
            count() AS spans,
            countIf({STATUS} = 'Error') AS errors
        FROM otel_traces
        WHERE TraceId GLOBAL IN (SELECT DISTINCT TraceId FROM otel_traces WHERE {{tenant}} AND {{conditions}})
          AND {{tenant}}
        GROUP BY TraceId
        HAVING trace_ns >= {{{{min_trace_ns:Int64}}}} AND trace_ns <= {{{{max_trace_ns:Int64}}}}
    ) AS traces
    {{usage}}
    ORDER BY {{order}}, traces.TraceId
    LIMIT {{{{limit:UInt32}}}}
)"""
"""The traces a ranked search finds: every trace with a span meeting ``{conditions}`` (no cap), its whole-trace
duration (first span start to last span end, ns) within the bounds, the first ``{limit:UInt32}`` by ``{order}``
(:data:`SEARCH_ORDERS`). ClickHouse keeps a few numbers per matching trace, never its spans; they count stored rows,
so a span stored twice (two collectors racing on one re-sent span) counts twice in ``spans`` and ``errors`` (the
summaries answered count it once). A template like :data:`MATCHED_TRACES`; ``{usage}`` is empty or
:data:`SEARCH_USAGE`."""

SEARCH_USAGE = """LEFT JOIN (
        SELECT TraceId, InputTokens + OutputTokens AS tokens
        FROM hotspan_trace_summary FINAL
        WHERE {summary_tenant}
    ) AS usage ON usage.TraceId = traces.TraceId"""
"""Each trace's tokens (input plus output) from the trace pipeline's summary; 0 for a trace not analysed yet."""

SEARCH_STAGE = """INNER JOIN (
        SELECT TraceId, StageNs[{{stage:String}}] AS stage_ns
        FROM hotspan_trace_summary FINAL
        WHERE {summary_tenant} AND stage_ns > 0
    ) AS usage ON usage.TraceId = traces.TraceId"""
"""Each analysed trace's critical-path ns in one stage (``{stage:String}``, an ``analysis.STAGES`` name), only the
traces that spent time in it: a stage's search lists the requests where that stage took longest."""

SEARCH_ORDERS = {
    "newest": "last_seen DESC",
    "oldest": "first_start ASC",
    "longest": "trace_ns DESC",
    "shortest": "trace_ns ASC",
    "most_errors": "errors DESC",
    "most_spans": "spans DESC",
    "most_tokens": "tokens DESC",
    "longest_stage": "stage_ns DESC",
}
"""The ``{order}`` of :data:`RANKED_TRACES` by sort name (``most_tokens`` needs :data:`SEARCH_USAGE`,
``longest_stage`` :data:`SEARCH_STAGE`)."""

_LATEST_TREE_COLUMNS = """
        TraceId,
        SpanId,
        Timestamp,
        SpanKind,
        SpanName,
        argMax(ParentSpanId, Version) AS ParentSpanId,
        argMax(ServiceName, Version) AS ServiceName,
        argMax(Duration, Version) AS Duration"""
"""A span's place in its trace, each identity's latest copy (``GROUP BY`` :data:`IDENTITY`): what the searches'
summaries and roots read."""

ROOT_ORDER = f"(toInt64(Duration), -{START_NS}, bitNot(reinterpretAsUInt64(reverse(unhex(SpanId)))), {KIND}, SpanName)"
"""The rank of root candidates in :data:`SEARCH`, highest first (``argMax``): the longest, then the earliest, then the
lower span ID (a span ID is 8 bytes, stored as 16 hex digits: read as a big-endian number, inverted), then of copies
of one span ID that start and end together, the last in (kind, name) order: the copy the analysis keeps
(:mod:`analysis.tree`: of copies ending together, the last row of a trace read, ordered by start, span ID, kind and
name; Jaeger UI's fixture ``ui_01`` names two roots with one span ID, start and duration)."""

_SEARCH_BODY = f"""{MATCHED_IDS}
SELECT
    TraceId AS trace_id,
    if(has_root, argMaxIf(ServiceName, {ROOT_ORDER}, ParentSpanId = ''), argMax(ServiceName, {ROOT_ORDER}))
        AS root_service,
    if(has_root, argMaxIf(SpanName, {ROOT_ORDER}, ParentSpanId = ''), argMax(SpanName, {ROOT_ORDER})) AS root_name,
    min({START_NS}) AS start_time_unix_nano,
    toUInt64(max({START_NS} + Duration) - min({START_NS})) AS duration_ns,
    count() AS span_count,
    uniqExact(ServiceName) AS service_count,
    countIf({STATUS} = 'Error') AS error_count,
    countIf(Hotspot) AS hotspot_count,
    countIf(ParentSpanId = '') > 0 AS has_root
FROM (
    SELECT{_LATEST_TREE_COLUMNS},
        argMax(StatusCode, Version) AS StatusCode,
        argMax({HOTSPOT}, Version) AS Hotspot
    FROM otel_traces
    {IN_MATCHED}
    WHERE {{tenant}}
    GROUP BY {IDENTITY}
)
GROUP BY TraceId
ORDER BY start_time_unix_nano DESC, trace_id
"""
SEARCH = MATCHED_TRACES + _SEARCH_BODY
"""Summaries of the traces a search finds, each span counted once (its latest copy). The root is the analysis'
(:attr:`analysis.tree.SpanTree.primary_root`): of the spans without a parent (else of every span), the longest, then
the earliest, then the lower span ID, then the copy of one span ID the analysis keeps (:data:`ROOT_ORDER`), so the
search, the trace page and the stored summaries name one root, and the answer does not depend on the order rows
arrive in, which differs between runs and between one node and shards. Where no span lacks a parent ID (``has_root``
false) the analysis picks among the spans whose parent the trace lacks: the longest span stands in here, and
:data:`ORPHAN_ROOTS` names the analysis' root for those traces."""

RANKED_SEARCH = RANKED_TRACES + _SEARCH_BODY
"""The summaries of :data:`SEARCH` for the traces of :data:`RANKED_TRACES`."""

ORPHAN_ROOTS = f"""
WITH spans AS (
    SELECT{_LATEST_TREE_COLUMNS}
    FROM otel_traces
    WHERE {TRACES_WHERE}
    GROUP BY {IDENTITY}
)
SELECT
    TraceId AS trace_id,
    argMax(ServiceName, {ROOT_ORDER}) AS root_service,
    argMax(SpanName, {ROOT_ORDER}) AS root_name
FROM (
    SELECT
        spans.TraceId AS TraceId,
        spans.SpanId AS SpanId,
        spans.SpanKind AS SpanKind,
        spans.SpanName AS SpanName,
        spans.ServiceName AS ServiceName,
        spans.Duration AS Duration,
        spans.Timestamp AS Timestamp
    FROM spans
    LEFT JOIN (SELECT DISTINCT TraceId, SpanId FROM spans) AS parents
        ON parents.TraceId = spans.TraceId AND parents.SpanId = spans.ParentSpanId
    WHERE parents.SpanId = '' OR spans.ParentSpanId = spans.SpanId
)
GROUP BY TraceId
"""
"""The root of each trace of ``trace_ids`` (``Array(String)``) as the analysis picks it where no span lacks a parent
ID (:data:`SEARCH`'s ``has_root`` false): of the spans whose parent the trace does not hold (orphans) or that name
themselves, in :data:`ROOT_ORDER`. Columns trace_id,
root_service, root_name; a trace whose every span has its parent (a cycle) has no row. Joins the traces' spans to
themselves, so only the search's rootless traces are read with it."""

SEARCH_SPANS = (
    MATCHED_TRACES
    + f"""{MATCHED_IDS}
SELECT{SPAN_COLUMNS}
FROM otel_traces
{IN_MATCHED}
WHERE {{tenant}}
ORDER BY trace_id, start_time_unix_nano, span_id, kind, name, Version DESC
LIMIT 1 BY {IDENTITY}
"""
)
"""Every span of the traces a search finds (the Jaeger APIs answer a search with whole traces), each once: its
latest copy, first of its copies in the sort, as in :data:`TRACE_SPANS`."""


def overlapping_traces(windows: int) -> str:
    """A query of one row holding, for each of ``windows`` windows ``[{from_<i>:UInt32}, {to_<i>:UInt32}]`` (Unix s,
    ``i`` from 0), a tuple (first, last, rows): the earliest and the latest span start (Unix s) of the traces with a
    span starting in the window, from ``otel_traces_trace_id_ts`` (every span of a trace lies between its ``Start``
    and ``End``), and how many lookup rows say so (0: no stored trace there). One read for every window, through the
    lookup's ``by_end`` projection (migration 0131): the traces ending at or after the earliest window's start, where
    the lookup itself, sorted by trace ID, is read whole (75 ms for the 10M traces of a 100M-span day). On a cluster
    it reads the ``Distributed`` table: the range must hold the traces of every shard."""
    overlaps = [
        f"(End >= toDateTime({{from_{i}:UInt32}}) AND Start <= toDateTime({{to_{i}:UInt32}}))" for i in range(windows)
    ]
    ranges = ", ".join(f"(toUInt32(minIf(Start, {o})), toUInt32(maxIf(End, {o})), countIf({o}))" for o in overlaps)
    return f"SELECT {ranges} FROM otel_traces_trace_id_ts WHERE {' OR '.join(overlaps)}"


def starting_in(ranges: int) -> str:
    """A condition on ``otel_traces`` rows: the span starts in one of ``ranges`` ranges
    ``[{first_<i>:UInt32}, {last_<i>:UInt32}]`` (Unix s, whole seconds, ``i`` from 0). It compares
    ``toDateTime(Timestamp)``, the sorting key's own expression, so ClickHouse reads the granules of those seconds
    only (:func:`in_time_range_of` says why ``Timestamp`` itself would not do)."""
    return " OR ".join(
        f"(toDateTime(Timestamp) >= toDateTime({{first_{i}:UInt32}}) "
        f"AND toDateTime(Timestamp) <= toDateTime({{last_{i}:UInt32}}))"
        for i in range(ranges)
    )


DEPENDENCY_CALLS = f"""
WITH spans AS (
    SELECT
        any({TENANT}) AS tenant,
        any(Timestamp) AS start,
        any(cityHash64({TENANT}, TraceId, SpanId)) AS span_key,
        argMax(cityHash64({TENANT}, TraceId, ParentSpanId), Version) AS parent_key,
        argMax(ParentSpanId != '', Version) AS has_parent,
        argMax(ServiceName, Version) AS service
    FROM otel_traces
    WHERE ({{span_ranges}}) AND {TENANT_FILTER}
    GROUP BY cityHash64({IDENTITY})
),
ends AS (
    SELECT tenant, key, role, service, toStartOfMinute(start) AS minute
    FROM spans
    ARRAY JOIN [span_key, parent_key] AS key, [0, 1] AS role
    WHERE role = 0 OR (has_parent AND arrayExists(
        window -> toUnixTimestamp64Nano(start) BETWEEN window.1 AND window.2, {{windows:Array(Tuple(Int64, Int64))}}))
),
pairs AS (
    SELECT
        any(tenant) AS tenant,
        arrayDistinct(groupArrayIf(service, role = 0)) AS parents,
        groupArrayIf((minute, service), role = 1) AS children
    FROM ends
    GROUP BY key
    HAVING notEmpty(parents) AND notEmpty(children)
)
SELECT tenant, child.1 AS minute, parent, child.2 AS child_service, count() AS call_count
FROM pairs
ARRAY JOIN parents AS parent
ARRAY JOIN children AS child
WHERE parent != child_service
GROUP BY tenant, minute, parent, child_service
"""
"""Service-to-service calls: parent→child span pairs whose services differ, counted per (owner tenant, minute of the
child's start, parent, child service) as columns tenant, minute, parent, child_service, call_count, for child spans
starting in the windows ``windows`` ([start, end] ns, inclusive; Jaeger's dependency rule), each span counted once
(its latest copy); the parent, a span of the same tenant and trace, may start before the window. ``{span_ranges}``
(filled by ``str.replace`` with :func:`starting_in`) bounds the spans read: the ranges of the traces overlapping the
windows (:func:`overlapping_traces`), which hold every child and its parent. One read of them serves both sides:
each span is one parent end (keyed by its own span ID) and, when it starts in a window and has a parent ID, one child
end (keyed by its parent's ID); ends are grouped by key, and each child counts once per distinct service of the spans
with its parent's ID (Zipkin's client and server halves share one). A join of children to parents read the same
granules twice: ``otel_traces`` is sorted by (service, span name, second), so any range reads a granule of every
(service, span name) pair. Spans are grouped by 64-bit hashes of their identity and of (tenant, trace ID, span ID),
and a span keeps its two keys as hashes, not its ID strings: ClickHouse groups one UInt64 several times faster than
six columns of which three are LowCardinality, a raw hour of 100M spans a day fits in the memory the join took
(0.8-1.0 GiB, where keeping the strings took 1.0-1.25), and two spans of a window share a hash with odds under 1e-6
at 4M spans a window (as :data:`TRACE_SIZE` counts spans). benchmarks/README.md, "Dependencies in one read, and the
lookup by end"."""

DEPENDENCY_TABLES = ("otel_traces",)
"""The table :data:`DEPENDENCY_CALLS` reads on each shard (its spans)."""

DEPENDENCIES = """
SELECT parent, child_service AS child, sum(call_count) AS call_count
FROM {calls}
GROUP BY parent, child
ORDER BY parent, child
"""
"""The calls of :data:`DEPENDENCY_CALLS` from ``{calls}``, :meth:`storage.layout.Layout.on_every_shard`: a child
and its parent are spans of one trace, so on a cluster each shard joins its own traces and only its (parent,
child, count) rows reach the initiator, summed here; through the ``Distributed`` tables every child and parent of
the window would travel to the initiator and be joined there (``EXPLAIN``: ``MergingAggregated`` and ``Distinct``
over both shards, then the join). A template: ``{calls}`` filled by ``str.replace`` (the calls hold braces)."""

DEPENDENCY_MINUTE_CALLS = """
SELECT tenant, toUInt32(minute) AS minute, parent, child_service AS child, sum(call_count) AS call_count
FROM {calls}
GROUP BY tenant, minute, parent, child
"""
""":data:`DEPENDENCIES` per owner tenant and minute (Unix s of its start): what the dependency rollup stores
(:mod:`storage.dependency_rollup`)."""

MATCHED_SPANS = f"""
SELECT trace_id, span_id, name, start_time_unix_nano, duration_ns, matched, service, status, kind, span_attributes,
    resource_attributes
FROM (
    SELECT *, count() OVER (PARTITION BY trace_id) AS matched
    FROM (
        SELECT TraceId AS trace_id, SpanId AS span_id, SpanName AS name, {START_NS} AS start_time_unix_nano,
            Duration AS duration_ns, ServiceName AS service, lower({STATUS}) AS status, lower({KIND}) AS kind,
            mapFilter((k, v) -> has({{{{keys:Array(String)}}}}, k), SpanAttributes) AS span_attributes,
            mapFilter((k, v) -> has({{{{keys:Array(String)}}}}, k), ResourceAttributes) AS resource_attributes
        FROM otel_traces
        WHERE TraceId IN {{{{trace_ids:Array(String)}}}} AND {{tenant}} AND {{conditions}}
          AND {in_time_range_of("{{trace_ids:Array(String)}}")}
        ORDER BY trace_id, start_time_unix_nano, span_id
        LIMIT 1 BY {IDENTITY}
    )
)
ORDER BY trace_id, start_time_unix_nano, span_id
LIMIT {{{{per_trace:UInt32}}}} BY trace_id
"""
"""Of the traces ``trace_ids``, the spans meeting ``{conditions}`` (each once), the first ``per_trace`` by start per
trace, each row with ``matched``, how many its trace has (Tempo's ``spanSet``), its service, lowercase status and kind,
and the span and resource attributes whose keys are in ``keys`` (what the query names, shown beside a matched span),
read within the traces' time range (:func:`in_time_range_of`). A template like :data:`MATCHED_TRACES`."""

TAG_NAMES = {
    "span": "SpanAttributes",
    "resource": "ResourceAttributes",
}
"""The attribute map each Tempo tag scope lists keys of."""

TAG_NAMES_OF = """
SELECT DISTINCT arrayJoin(mapKeys({column})) AS tag
FROM otel_traces
WHERE {tenant} AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
  AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
ORDER BY tag
LIMIT {{limit:UInt32}}
"""
"""Attribute keys of one map (``{column}``, a :data:`TAG_NAMES` value) on spans starting in the window, sorted, at
most ``limit``. A template: ``{column}`` and ``{tenant}`` filled by ``str.format``."""

TAG_VALUES_OF = """
SELECT DISTINCT {value} AS value
FROM otel_traces
WHERE {tenant} AND {present} AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
  AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
ORDER BY value
LIMIT {{limit:UInt32}}
"""
"""Distinct values of one span field (``{value}``, present where ``{present}``) on spans starting in the window,
sorted, at most ``limit``: the fields are :data:`TAG_VALUE_FIELDS`', the key a bound ``{key:String}``."""

TAG_VALUE_FIELDS = {
    ("intrinsic", "name"): ("SpanName", "1"),
    ("intrinsic", "status"): (f"lower({STATUS})", "1"),
    ("intrinsic", "kind"): (f"lower({KIND})", "1"),
    ("resource", "service.name"): ("ServiceName", "1"),
    ("span", ""): ("SpanAttributes[{key:String}]", "mapContains(SpanAttributes, {key:String})"),
    ("resource", ""): ("ResourceAttributes[{key:String}]", "mapContains(ResourceAttributes, {key:String})"),
}
"""``(value, present)`` SQL of a tag by ``(scope, name)``; ``(scope, "")`` for any other attribute of that scope."""
