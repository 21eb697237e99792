"""OTLP protobuf → ``otel_traces`` rows inside ClickHouse: the collector's fast conversion path.

A batch file holds several ``ExportTraceServiceRequest`` messages, each length-delimited (ClickHouse's
``Protobuf`` input format) and each followed by an extra field ``hotspan_request_index`` (see
``collector/proto/otlp_trace.proto`` and :mod:`collector.wire`). Three statements handle a batch:

1. :meth:`SqlConversion.stage_sql`: parse the file once and write one row per span (plus one per
   resource or scope without spans) into a ``Memory`` staging table: the finished ``otel_traces``
   columns, the span's position, the first validity rule it breaks, its duplicate key, and whether
   an attribute value nests too deeply for SQL.
2. :meth:`SqlConversion.check_sql`: per request, the span count, the invalid spans and why, the
   groups of valid spans sharing a ``(traceId, spanId)``, the deeply nested spans and the resources
   without ``service.name``; read from the staging table's few small columns.
3. :meth:`SqlConversion.insert_sql`: ``INSERT INTO otel_traces SELECT`` from the staging table of
   every span but those listed in an exclusions file (rejected, superseded duplicates, deeply nested
   ones, which :func:`collector.batch.to_batch` converts instead).

No span passes through Python on this path. The SQL reproduces :mod:`collector.batch` exactly: the
same validity rules in the same order with the same messages, the same
:class:`~collector.limits.SpanLimits`, and attribute values stringified as
:func:`collector.attributes.value_to_string` does (Go's shortest ``%g`` for doubles, Python's ``repr``
inside JSON arrays, base64 for bytes, JSON for arrays and key-value lists of scalars).
``tests/collector/test_sqlconvert.py`` compares both paths row by row. Strings that are not valid
UTF-8 (Python's protobuf runtime refuses such requests whole) are stored with each bad sequence
replaced by U+FFFD.

Expressions work on array subcolumns (``sp.attributes.value.string_value``) rather than on tuples
inside lambdas: ClickHouse evaluates the former column-wise, several times faster.

Needs ClickHouse >= 25.1 (``input_format_protobuf_oneof_presence``) reading the batch file with the
``file`` table function, so the engine must share the collector's file system: the embedded chDB
engine (``chdb://``) does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from collector.limits import TRUNCATED_KEY, SpanLimits
from collector.rejections import Position
from storage.schema import SPAN_KINDS, STATUS_CODES, STORED_SCHEMA

REQUEST_INDEX_FIELD = 15000
"""Field number of ``hotspan_request_index`` in the batch schema (far above any OTLP field)."""

TENANT_FIELD = 15001
"""Field number of ``hotspan_tenant``: the tenant the request's spans are stored for (``storage.tenancy``)."""

_PRESENCE = (
    "Enum8('' = 0, 'string_value' = 1, 'bool_value' = 2, 'int_value' = 3, 'double_value' = 4,"
    " 'array_value' = 5, 'kvlist_value' = 6, 'bytes_value' = 7)"
)
_SCALAR = (
    "Tuple(string_value String, bool_value Bool, int_value Int64, double_value Float64, bytes_value String,"
    f" value {_PRESENCE})"
)
_ANY = (
    "Tuple(string_value String, bool_value Bool, int_value Int64, double_value Float64, bytes_value String,"
    f" array_value Tuple(values Array({_SCALAR})),"
    f" kvlist_value Tuple(values Array(Tuple(key String, value {_SCALAR}))), value {_PRESENCE})"
)
_ATTRS = f"Array(Tuple(key String, value {_ANY}))"
_SPAN = (
    "Tuple(trace_id String, span_id String, trace_state String, parent_span_id String, name String,"
    " kind Int32, start_time_unix_nano UInt64, end_time_unix_nano UInt64,"
    f" attributes {_ATTRS},"
    f" events Array(Tuple(time_unix_nano UInt64, name String, attributes {_ATTRS})),"
    f" links Array(Tuple(trace_id String, span_id String, trace_state String, attributes {_ATTRS})),"
    " status Tuple(message String, code Int32))"
)
STRUCTURE = (
    "hotspan_request_index UInt64, hotspan_tenant String, resource_spans Array(Tuple(resource Tuple(attributes "
    f"{_ATTRS}), scope_spans Array(Tuple(scope Tuple(name String, version String), spans Array({_SPAN})))))"
)
"""ClickHouse structure of one batch row (one request)."""

EXCLUSIONS_STRUCTURE = "q UInt64, r UInt32, s UInt32, p UInt32"
"""Columns of an exclusions file (``TSV``): request index and 1-based resource, scope, span indexes."""

_STAGE_COLUMNS = (
    "q UInt64, r UInt32, s UInt32, p UInt32, reason String, dup_key String, deep UInt8, unnamed UInt8,"
    " truncated UInt8,"
    " Timestamp DateTime64(9), TraceId String, SpanId String, ParentSpanId String, TraceState String,"
    " SpanName LowCardinality(String), SpanKind LowCardinality(String), ServiceName LowCardinality(String),"
    " ResourceAttributes Map(LowCardinality(String), String), ScopeName String, ScopeVersion String,"
    " SpanAttributes Map(LowCardinality(String), String), Duration UInt64, StatusCode LowCardinality(String),"
    " StatusMessage String, `Events.Timestamp` Array(DateTime64(9)), `Events.Name` Array(LowCardinality(String)),"
    " `Events.Attributes` Array(Map(LowCardinality(String), String)), `Links.TraceId` Array(String),"
    " `Links.SpanId` Array(String), `Links.TraceState` Array(String),"
    " `Links.Attributes` Array(Map(LowCardinality(String), String)), Tenant LowCardinality(String)"
)

_MAX_TIME_NS = 2**63 - 1
_SPANS_PER_BLOCK = 8192
"""Rows per block through the conversion (after the ARRAY JOINs): bounds its memory to a few thousand
spans at a time, while keeping the fixed per-block cost of the large expression (about 1 ms) small."""
_ROWS_PER_INSERT_BLOCK = 25_000
"""Rows per block written to ``otel_traces``: bounds the insert's memory. Fixed, so inserting the same
batch again forms the same blocks (deduplication compares them block by block)."""
_PARSED_BYTES_PER_BLOCK = 8 * 1024 * 1024
"""Protobuf bytes parsed per block (a few requests): the parsed, not yet converted form of an attribute
takes a dozen columns, so parsing a whole batch at once would take several times its size."""
_ENUM = {
    "string_value": 1,
    "bool_value": 2,
    "int_value": 3,
    "double_value": 4,
    "array_value": 5,
    "kvlist_value": 6,
    "bytes_value": 7,
}
"""Values of the oneof-presence enum (``_PRESENCE``): AnyValue field numbers."""


def schema_file() -> Path:
    """Absolute path of the ``.proto`` ClickHouse reads batches with.

    Raises:
        FileNotFoundError: the package was installed without ``collector/proto/otlp_trace.proto``.
    """
    path = Path(str(resources.files("collector.proto").joinpath("otlp_trace.proto")))
    if not path.is_file():
        raise FileNotFoundError(f"OTLP schema for ClickHouse missing: {path}")
    return path


def literal(text: str) -> str:
    """A ClickHouse string literal for ``text`` (quotes, backslashes and control bytes escaped)."""
    out = []
    for char in text:
        if char in "\\'":
            out.append("\\" + char)
        elif ord(char) < 0x20:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "'" + "".join(out) + "'"


def _bind(value: str, name: str, body: str) -> str:
    """``body`` with ``name`` bound to ``value``, evaluated once (ClickHouse has no ``LET``)."""
    return f"arrayMap({name} -> {body}, [{value}])[1]"


_NUMBER_PARTS = literal(r"^(\d+)(?:\.(\d+))?(?:e(-?\d+))?$")
_NEEDS_JSON_ESCAPE = literal(r'[\x00-\x1f"\\]')


def _float_parts(d: str) -> str:
    """``(negative, digits, point)`` of a finite non-zero double: ``0.DIGITS × 10^point``, digits the
    shortest round-trip ones (``toString`` and Python's ``repr`` both produce them) without leading or
    trailing zeros."""
    digits = "concat(g[1], g[2])"
    body = (
        f"tuple(startsWith(t0, '-'), trimRight(trimLeft({digits}, '0'), '0'),"
        f" toInt32(length(g[1])) + toInt32OrZero(g[3]) - toInt32(length({digits}) - length(trimLeft({digits}, '0'))))"
    )
    groups = f"extractGroups(if(startsWith(t0, '-'), substring(t0, 2), t0), {_NUMBER_PARTS})"
    return _bind(f"toString({d})", "t0", _bind(groups, "g", body))


def _exponent_form(digits: str, point: str) -> str:
    exponent = f"({point} - 1)"
    return (
        f"concat(substring({digits}, 1, 1), if(length({digits}) > 1, concat('.', substring({digits}, 2)), ''),"
        f" 'e', if({exponent} < 0, '-', '+'), if(abs({exponent}) < 10, '0', ''), toString(abs({exponent})))"
    )


def _fixed_form(digits: str, point: str) -> str:
    return (
        f"multiIf({point} <= 0, concat('0.', repeat('0', toUInt32(greatest(-{point}, 0))), {digits}),"
        f" {point} >= length({digits}),"
        f" concat({digits}, repeat('0', toUInt32(greatest({point} - toInt32(length({digits})), 0)))),"
        f" concat(substring({digits}, 1, {point}), '.', substring({digits}, {point} + 1)))"
    )


def go_float_sql(d: str) -> str:
    """SQL for :func:`collector.attributes.go_float` of the Float64 expression ``d``.

    Between 1e-4 and 1e21 (and for zero) ``toString`` already writes the same text; only other
    magnitudes take the digit-by-digit path.
    """
    digits, point = "f.2", "f.3"
    general = _bind(
        _float_parts(d),
        "f",
        f"concat(if(f.1, '-', ''), if({point} - 1 < -4 OR {point} - 1 >= 21,"
        f" {_exponent_form(digits, point)}, {_fixed_form(digits, point)}))",
    )
    return (
        f"multiIf(isNaN({d}), 'NaN', isInfinite({d}), if({d} > 0, '+Inf', '-Inf'),"
        f" {d} = 0 OR (abs({d}) >= 1e-4 AND abs({d}) < 1e21 AND position(toString({d}), 'e') = 0),"
        f" toString({d}), {general})"
    )


_SCALAR_JSON = ("string_value", "int_value", "bool_value", "bytes_value")


def _json_scalars(values: str) -> str:
    """SQL: the JSON text of each element of ``values`` (an Array of scalar AnyValue tuples) as
    ``json.dumps`` writes it, for the kinds the stage leaves to SQL: strings needing no escapes,
    integers, booleans, bytes (base64) and empty values (``null``)."""
    kind = _ENUM
    return (
        "arrayMap((t, vs, vi, vb, vy) -> multiIf("
        f"t = {kind['string_value']}, concat('\"', toValidUTF8(vs), '\"'), t = {kind['int_value']}, toString(vi),"
        f" t = {kind['bool_value']}, if(vb, 'true', 'false'), t = {kind['bytes_value']},"
        " concat('\"', base64Encode(vy), '\"'), 'null'),"
        f" CAST({values}.value, 'Array(Int8)'), {values}.string_value, {values}.int_value, {values}.bool_value,"
        f" {values}.bytes_value)"
    )


Subcolumns = Callable[[str], str]
"""Maps an attribute subcolumn path (``key``, ``value.value``, ``value.string_value``, ...) to an SQL
Array expression of it: the attribute array's own subcolumns, or arrays built from several lists."""

_VALUE_FIELDS = (
    "value.value",
    "value.string_value",
    "value.int_value",
    "value.double_value",
    "value.bool_value",
    "value.bytes_value",
    "value.array_value",
    "value.kvlist_value",
)


def attribute_columns(attrs: str, keep: int | None = None) -> Subcolumns:
    """The subcolumns of attribute array ``attrs``, cut to its first ``keep`` elements."""

    def column(path: str) -> str:
        expression = f"{attrs}.{path}"
        return expression if keep is None else f"arraySlice({expression}, 1, {keep})"

    return column


def value_strings_sql(columns: Subcolumns) -> str:
    """SQL: the stored string of each attribute value, as :func:`collector.attributes.value_to_string`
    writes it.

    Arrays and key-value lists are written here only when every element is a scalar of a kind
    :func:`_json_scalars` handles; :func:`needs_python_sql` sends the others to the Python
    conversion (their text here is a placeholder).
    """
    kind = _ENUM
    array = f"concat('[', arrayStringConcat({_json_scalars('av.values')}, ','), ']')"
    kvlist = (
        "concat('{', arrayStringConcat(arrayMap((k, v) -> concat('\"', toValidUTF8(k), '\":', v),"
        f" kl.values.key, {_json_scalars('kl.values.value')}), ','), '}}')"
    )
    arrays = ", ".join(columns(path) for path in _VALUE_FIELDS[1:])
    return (
        "arrayMap((t, vs, vi, vd, vb, vy, av, kl) -> multiIf("
        f"t = {kind['string_value']}, toValidUTF8(vs), t = {kind['int_value']}, toString(vi),"
        f" t = {kind['double_value']}, {go_float_sql('vd')}, t = {kind['bool_value']}, if(vb, 'true', 'false'),"
        f" t = {kind['bytes_value']}, base64Encode(vy), t = {kind['array_value']}, {array},"
        f" t = {kind['kvlist_value']}, {kvlist}, ''),"
        f" CAST({columns('value.value')}, 'Array(Int8)'), {arrays})"
    )


def needs_python_sql(columns: Subcolumns) -> str:
    """SQL: does an attribute value need the Python conversion?

    True for an array or key-value list holding anything :func:`_json_scalars` does not write
    (doubles, nested arrays or lists, strings or keys that JSON must escape) and for a key-value
    list with a repeated key (Python keeps the first position and the last value, as a dict does).
    """
    kind = _ENUM
    simple = ", ".join(str(kind[name]) for name in _SCALAR_JSON)
    escaped = f"match(x, {_NEEDS_JSON_ESCAPE})"

    def unusual(values: str) -> str:
        return (
            f"arrayExists((t, x) -> t NOT IN (0, {simple}) OR (t = {kind['string_value']} AND {escaped}),"
            f" CAST({values}.value, 'Array(Int8)'), {values}.string_value)"
        )

    return (
        f"arrayExists((t, av, kl) -> (t = {kind['array_value']} AND {unusual('av.values')})"
        f" OR (t = {kind['kvlist_value']} AND ({unusual('kl.values.value')}"
        f" OR arrayExists(x -> {escaped}, kl.values.key)"
        " OR length(arrayDistinct(kl.values.key)) != length(kl.values))),"
        f" CAST({columns('value.value')}, 'Array(Int8)'), {columns('value.array_value')},"
        f" {columns('value.kvlist_value')})"
    )


def _id_problem(raw: str, size: int, field: str) -> str:
    """SQL: the :func:`storage.ids.check_id_bytes` message for ID bytes ``raw`` ('' when valid).
    ``field`` may be an SQL expression (for indexed link fields) or a plain name."""
    name = field if field.startswith("concat(") else literal(field)
    padded = f"if(length({raw}) = 8, concat(repeat('\\0', 8), {raw}), {raw})" if size == 16 else raw
    return (
        f"multiIf(length({padded}) != {size},"
        f" concat({name}, ' must be {size} bytes ({size * 2} hex characters), got ', toString(length({padded})),"
        f" ' bytes'), {padded} = repeat('\\0', {size}), concat({name}, ' must not be all zeros'), '')"
    )


def span_problem_sql(sp: str) -> str:
    """SQL for :func:`collector.batch.check_span` of span tuple ``sp``: the first broken rule's message
    or ''. Every rule is evaluated (they are cheap) and the first non-empty message wins."""
    start, end = f"{sp}.start_time_unix_nano", f"{sp}.end_time_unix_nano"
    beyond = "' is beyond the year 2262'"
    event = (
        f"arrayMap((e, i) -> if(e > {_MAX_TIME_NS}, concat('events[', toString(i), '].timeUnixNano ', toString(e),"
        f" {beyond}), ''), {sp}.events.time_unix_nano, range(length({sp}.events)))"
    )
    trace_name = "concat('links[', toString(i), '].traceId')"
    span_name = "concat('links[', toString(i), '].spanId')"
    link = (
        f"arrayMap((tid, sid, i) -> concat({_id_problem('tid', 16, trace_name)},"
        f" if({_id_problem('tid', 16, 'x')} = '', {_id_problem('sid', 8, span_name)}, '')),"
        f" {sp}.links.trace_id, {sp}.links.span_id, range(length({sp}.links)))"
    )
    rules = [
        _id_problem(f"{sp}.trace_id", 16, "traceId"),
        _id_problem(f"{sp}.span_id", 8, "spanId"),
        f"if({sp}.parent_span_id = '', '', {_id_problem(f'{sp}.parent_span_id', 8, 'parentSpanId')})",
        f"if({start} = 0, 'startTimeUnixNano is missing or 0', '')",
        f"if({end} < {start}, concat('endTimeUnixNano ', toString({end}), ' is before startTimeUnixNano ',"
        f" toString({start})), '')",
        f"if({start} > {_MAX_TIME_NS}, concat('startTimeUnixNano ', toString({start}), {beyond}), '')",
        f"if({sp}.kind < 0 OR {sp}.kind >= {len(SPAN_KINDS)},"
        f" concat('kind ', toString({sp}.kind), ' is not a SpanKind value (0-5)'), '')",
        f"if({sp}.status.code < 0 OR {sp}.status.code >= {len(STATUS_CODES)},"
        f" concat('status.code ', toString({sp}.status.code), ' is not a StatusCode value (0-2)'), '')",
    ]
    listed = f"arrayConcat([{', '.join(rules)}], {event}, {link})"
    return f"arrayFirst(m -> m != '', {listed})"


@dataclass(frozen=True)
class RequestCheck:
    """What the check found in one request of a batch.

    Attributes:
        spans: spans in the request.
        invalid: ``(position, reason)`` of each span breaking a rule, in request order.
        duplicates: positions of valid spans sharing ``(traceId, spanId, kind, name, start)``, one group each,
            in request order (the last one is kept).
        python: positions of valid spans that the Python conversion must store.
        unnamed_resources: indexes of resources without ``service.name``.
        truncated: valid spans that a limit cut down (duplicates included).
    """

    spans: int
    invalid: tuple[tuple[Position, str], ...]
    duplicates: tuple[tuple[Position, ...], ...]
    python: tuple[Position, ...]
    unnamed_resources: tuple[int, ...]
    truncated: int


class SqlConversion:
    """Builds the statements that convert batch files; pure (no I/O), thread-safe.

    Args:
        limits: the per-span limits to apply, as :func:`collector.batch.to_batch` does.
        schema_path: the ``.proto`` ClickHouse reads batches with (default :func:`schema_file`).
    """

    def __init__(self, limits: SpanLimits, schema_path: Path | None = None) -> None:
        self.limits = limits
        self.schema_path = schema_path or schema_file()

    @staticmethod
    def stage_table_sql(name: str) -> str:
        """DDL of a staging table (``Memory`` engine: rows live only until the batch is stored)."""
        return f"CREATE TABLE IF NOT EXISTS {name} ({_STAGE_COLUMNS}) ENGINE = Memory"

    def stage_sql(self, batch_path: Path, stage_table: str) -> str:
        """Parse and convert the batch file into ``stage_table`` (emptied beforehand by the caller).

        One reading thread keeps the rows in file order, so staging the same file twice gives the
        same rows in the same order (which the deduplicated insert relies on). The attributes of a
        span, its kept events and its kept links are converted together, as one array, to keep the
        statement small (ClickHouse's analysis time grows with it).
        """
        lim = self.limits
        n, chars = lim.max_attributes, lim.max_value_chars
        kinds = "[" + ", ".join(literal(k) for k in SPAN_KINDS) + "]"
        codes = "[" + ", ".join(literal(c) for c in STATUS_CODES) + "]"

        def dropped(items: str, keep: int) -> str:
            return f"greatest(toInt64(length({items})) - {keep}, 0)"

        def shortened(raw: str) -> str:
            return f"arrayCount(x -> lengthUTF8(x) > {chars}, {raw})"

        def hex_trace(raw: str) -> str:
            return f"if(length({raw}) = 8, concat('0000000000000000', lower(hex({raw}))), lower(hex({raw})))"

        def maps(lengths: str, base: str) -> str:
            """Attribute maps of consecutive slices (``lengths``) of the span's converted attributes."""
            return (
                f"arrayMap((at, len) -> mapFromArrays(arraySlice(all_keys, at, len), arraySlice(all_cut, at, len)),"
                f" arrayMap((c, len) -> {base} + c - len + 1, arrayCumSum({lengths}), {lengths}), {lengths})"
            )

        marker_items = [
            ("attributes", dropped("sp.attributes", n)),
            ("events", dropped("sp.events", lim.max_events)),
            ("links", dropped("sp.links", lim.max_links)),
            ("event_attributes", f"arraySum(arrayMap(a -> {dropped('a', n)}, kept_events.attributes))"),
            ("link_attributes", f"arraySum(arrayMap(a -> {dropped('a', n)}, kept_links.attributes))"),
            ("resource_attributes", "res_dropped"),
            ("values", f"{shortened('all_raw')} + res_shortened"),
        ]
        marker = (
            "arrayStringConcat(arrayFilter(x -> x != '', ["
            + ", ".join(f"if(({count}) > 0, concat('{name}=', toString({count})), '')" for name, count in marker_items)
            + "]), ',')"
        )
        service_from_end = "indexOf(arrayReverse(res_keys_all), 'service.name')"
        # The kept attributes of the span, its kept events and its kept links, one array per subcolumn,
        # converted together: one conversion expression in the statement instead of three (ClickHouse's
        # analysis time grows with the statement) without copying whole attribute tuples.
        gathered = ",\n        ".join(
            f"arrayConcat(arraySlice(sp.attributes.{path}, 1, {n}),"
            f" arrayFlatten(arrayMap(a -> arraySlice(a.{path}, 1, {n}), kept_events.attributes)),"
            f" arrayFlatten(arrayMap(a -> arraySlice(a.{path}, 1, {n}), kept_links.attributes)))"
            f" AS all_{path.replace('.', '_')}"
            for path in ("key", *_VALUE_FIELDS)
        )
        dup_key = (
            "concat(if(length(sp.trace_id) = 8, concat(repeat('\\0', 8), sp.trace_id), sp.trace_id), sp.span_id,"
            " toString(sp.kind), '\\0', sp.name, '\\0', toString(sp.start_time_unix_nano))"
        )
        return f"""
INSERT INTO {stage_table}
SETTINGS max_insert_threads = 1
SELECT
    q, r, s, p,
    if(p > 0, {span_problem_sql("sp")}, '') AS reason,
    {dup_key} AS dup_key,
    p > 0 AND (resource_deep OR {needs_python_sql(lambda path: "all_" + path.replace(".", "_"))}) AS deep,
    s <= 1 AND p <= 1 AND r > 0 AND svc = '' AS unnamed,
    marker != '' AS truncated,
    fromUnixTimestamp64Nano(toInt64(least(sp.start_time_unix_nano, {_MAX_TIME_NS}))) AS Timestamp,
    {hex_trace("sp.trace_id")} AS TraceId,
    lower(hex(sp.span_id)) AS SpanId,
    lower(hex(sp.parent_span_id)) AS ParentSpanId,
    toValidUTF8(sp.trace_state) AS TraceState,
    toValidUTF8(sp.name) AS SpanName,
    {kinds}[greatest(least(sp.kind, {len(SPAN_KINDS) - 1}), 0) + 1] AS SpanKind,
    service AS ServiceName,
    res_map AS ResourceAttributes,
    toValidUTF8(scope_name) AS ScopeName,
    toValidUTF8(scope_version) AS ScopeVersion,
    mapFromArrays(
        arrayConcat(arraySlice(all_keys, 1, span_count), if(marker = '', [], [{literal(TRUNCATED_KEY)}])),
        arrayConcat(arraySlice(all_cut, 1, span_count), if(marker = '', [], [marker]))
    ) AS SpanAttributes,
    sp.end_time_unix_nano - sp.start_time_unix_nano AS Duration,
    {codes}[greatest(least(sp.status.code, {len(STATUS_CODES) - 1}), 0) + 1] AS StatusCode,
    toValidUTF8(sp.status.message) AS StatusMessage,
    arrayMap(t -> fromUnixTimestamp64Nano(toInt64(least(t, {_MAX_TIME_NS}))), kept_events.time_unix_nano)
        AS `Events.Timestamp`,
    arrayMap(x -> toValidUTF8(x), kept_events.name) AS `Events.Name`,
    {maps("event_counts", "span_count")} AS `Events.Attributes`,
    arrayMap(x -> {hex_trace("x")}, kept_links.trace_id) AS `Links.TraceId`,
    arrayMap(x -> lower(hex(x)), kept_links.span_id) AS `Links.SpanId`,
    arrayMap(x -> toValidUTF8(x), kept_links.trace_state) AS `Links.TraceState`,
    {maps("link_counts", "span_count + arraySum(event_counts)")} AS `Links.Attributes`,
    tenant AS Tenant
FROM (
    SELECT *, arrayMap(x -> leftUTF8(x, {chars}), all_raw) AS all_cut, {marker} AS marker
    FROM (
    SELECT *,
        arrayMap(k -> toValidUTF8(k), all_key) AS all_keys,
        {value_strings_sql(lambda path: "all_" + path.replace(".", "_"))} AS all_raw
    FROM (
    -- Each level turns the previous level's aliases into columns: ClickHouse's analyzer copies an
    -- alias's whole expression into every use, and these are used many times.
    SELECT
        q, r, s, p, tenant, sp, scope_name, scope_version, svc, service, res_map, res_dropped, res_shortened,
        resource_deep,
        arraySlice(sp.events, 1, {lim.max_events}) AS kept_events,
        arraySlice(sp.links, 1, {lim.max_links}) AS kept_links,
        least(length(sp.attributes), {n}) AS span_count,
        arrayMap(a -> least(length(a), {n}), kept_events.attributes) AS event_counts,
        arrayMap(a -> least(length(a), {n}), kept_links.attributes) AS link_counts,
        {gathered}
    FROM (
        SELECT
            q, r, s, tenant, svc, service, res_map, res_dropped, res_shortened, resource_deep,
            ss.scope.name AS scope_name, ss.scope.version AS scope_version, ss.spans AS spans
        FROM (
            SELECT
                hotspan_request_index AS q, hotspan_tenant AS tenant, r, rs.scope_spans AS scopes,
                arrayMap(k -> toValidUTF8(k), rs.resource.attributes.key) AS res_keys_all,
                {value_strings_sql(attribute_columns("rs.resource.attributes"))} AS res_raw_all,
                arrayFilter(i -> indexOf(res_keys_all, res_keys_all[i]) = i, arrayEnumerate(res_keys_all)) AS res_first,
                arraySlice(res_first, 1, {n}) AS res_kept,
                arrayMap(
                    i -> res_raw_all[length(res_keys_all) + 1 - indexOf(arrayReverse(res_keys_all), res_keys_all[i])],
                    res_kept
                ) AS res_raw,
                mapFromArrays(arrayMap(i -> res_keys_all[i], res_kept), arrayMap(x -> leftUTF8(x, {chars}), res_raw))
                    AS res_map,
                toInt64(length(res_first)) - toInt64(length(res_kept)) AS res_dropped,
                {shortened("res_raw")} AS res_shortened,
                {service_from_end} AS svc_from_end,
                if(svc_from_end = 0, '',
                   leftUTF8(res_raw_all[length(res_keys_all) + 1 - svc_from_end], {chars})) AS svc,
                if(svc = '', 'unknown_service', svc) AS service,
                {needs_python_sql(attribute_columns("rs.resource.attributes"))} AS resource_deep
            FROM file({literal(str(batch_path))}, 'Protobuf', {literal(STRUCTURE)})
            LEFT ARRAY JOIN resource_spans AS rs, arrayEnumerate(resource_spans) AS r
        )
        LEFT ARRAY JOIN scopes AS ss, arrayEnumerate(scopes) AS s
    )
    -- One ARRAY JOIN per level: joining spans in the scope's SELECT would copy every scope's
    -- whole span array into each of its span rows.
    LEFT ARRAY JOIN spans AS sp, arrayEnumerate(spans) AS p
    )
    )
)
SETTINGS format_schema = {literal(f"{self.schema_path}:ExportTraceServiceRequest")},
    input_format_protobuf_oneof_presence = 1, max_threads = 1, max_block_size = {_SPANS_PER_BLOCK},
    input_format_max_block_size_bytes = {_PARSED_BYTES_PER_BLOCK}
"""

    @staticmethod
    def check_sql(stage_table: str) -> str:
        """The check over a staged batch: one row per request, read by :meth:`parse_check`."""
        return f"""
SELECT q, sum(n), groupArrayArray(bad), groupArrayIf(arraySort(same), length(same) > 1),
       groupArrayArray(deep), arraySort(groupUniqArrayArray(unnamed)), sum(cut)
FROM (
    SELECT q, dup_key, countIf(p > 0) AS n, countIf(p > 0 AND reason = '' AND truncated) AS cut,
           groupArrayIf((r - 1, s - 1, p - 1, reason), p > 0 AND reason != '') AS bad,
           groupArrayIf((r - 1, s - 1, p - 1), p > 0 AND reason = '') AS same,
           groupArrayIf((r - 1, s - 1, p - 1), p > 0 AND reason = '' AND deep) AS deep,
           groupArrayIf(r - 1, unnamed) AS unnamed
    FROM {stage_table}
    GROUP BY q, dup_key
)
GROUP BY q
ORDER BY q
"""

    @staticmethod
    def parse_check(rows: list[tuple]) -> dict[int, RequestCheck]:
        """:class:`RequestCheck` by request index from the rows of :meth:`check_sql`."""
        checks = {}
        for q, spans, bad, same, deep, unnamed, truncated in rows:
            checks[int(q)] = RequestCheck(
                spans=int(spans),
                invalid=tuple(sorted(((int(r), int(s), int(p)), reason) for r, s, p, reason in bad)),
                duplicates=tuple(sorted(tuple(tuple(int(x) for x in pos) for pos in group) for group in same)),
                python=tuple(sorted(tuple(int(x) for x in pos) for pos in deep)),
                unnamed_resources=tuple(int(r) for r in unnamed),
                truncated=int(truncated),
            )
        return checks

    @staticmethod
    def insert_sql(stage_table: str, exclusions_path: Path, table: str, dedup_token: str) -> str:
        """``INSERT INTO table`` of every staged span but those in the exclusions file.

        The staged rows come out in file order in one block (one thread), so ``dedup_token`` turns
        a repeated insert of the same batch into a no-op on tables with
        ``non_replicated_deduplication_window`` (or replicated ones).
        """
        names = ", ".join(f"`{name}`" for name in STORED_SCHEMA.names)
        return f"""
INSERT INTO {table} ({names})
SETTINGS insert_deduplication_token = {literal(dedup_token)}, max_insert_threads = 1,
    max_insert_block_size = {_ROWS_PER_INSERT_BLOCK}, min_insert_block_size_rows = {_ROWS_PER_INSERT_BLOCK},
    min_insert_block_size_bytes = 0
SELECT {names}
FROM {stage_table}
WHERE p > 0 AND (q, r, s, p) NOT IN (
    SELECT q, r, s, p FROM file({literal(str(exclusions_path))}, 'TSV', {literal(EXCLUSIONS_STRUCTURE)})
)
SETTINGS max_threads = 1
"""
