"""TraceQL (:mod:`storage.traceql`) as a ClickHouse condition on ``otel_traces`` rows, every literal and attribute
key a bound parameter.

A query compiles to the condition a *returned* span meets (Tempo's rule: a query returns spans; a trace matches
when it has one): ``{ c }`` is the row condition ``c``; ``L || R`` is ``L OR R``; ``L && R`` a span of either
side in a trace that also has a span of the other; ``L >> R`` an ``R`` span below an ``L`` span (a recursive walk
down ``ParentSpanId``, at most :data:`MAX_DEPTH` levels). Subqueries carry :data:`storage.trace_sql.TENANT_FILTER`,
so a trace matches through the caller's own spans only.

Attribute values are stored as strings (``storage.schema``): ``=``/``!=`` with a string or bool compare the text
(``true``/``false``), with a number the value read as a float, as do ``<``/``>``; a missing attribute matches
nothing, ``!=`` included (Tempo's rule: ``nil != "x"`` is false). ``resource.service.name`` reads ``ServiceName``.
"""

from __future__ import annotations

from itertools import count

from storage.trace_sql import KIND, STATUS, TENANT_FILTER
from storage.traceql import Comparison, Field, SpanAnd, SpanCondition, Spanset, SpansetQuery, Value

MAX_DEPTH = 64
"""Deepest a ``>>`` walk goes below its ancestor span: a bound on a parent loop in bad data."""

MAX_SQL_CHARS = 100_000
"""Longest condition compiled: ``&&`` between spansets writes each side twice, so nested ``&&`` doubles the SQL per
level; a longer one is refused (:class:`QueryTooLarge`) well below ClickHouse's ``max_query_size`` (256 KiB)."""

_OPERATORS = {"=": "=", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<="}
"""TraceQL operator → SQL operator: the only operator text that reaches the SQL."""

_INTRINSICS = {"name": ("SpanName", "String"), "status": (STATUS, "String"), "kind": (KIND, "String")}
_MAPS = {
    "span": ("SpanAttributes",),
    "resource": ("ResourceAttributes",),
    "any": ("SpanAttributes", "ResourceAttributes"),
}


class QueryTooLarge(ValueError):
    """A query whose SQL would exceed :data:`MAX_SQL_CHARS`."""


class _Compiler:
    """One query's compilation: numbers its parameters (``tq_0``, ``tq_1``...) and recursive walks."""

    def __init__(self) -> None:
        self.parameters: dict[str, object] = {}
        self._names = count()

    def bind(self, value: object, sql_type: str) -> str:
        name = f"tq_{next(self._names)}"
        self.parameters[name] = value
        return f"{{{name}:{sql_type}}}"

    def query(self, node: SpansetQuery) -> str:
        sql = self._query(node)
        # Checked at every level, so a deep nesting stops once past the bound, before its SQL grows further.
        if len(sql) > MAX_SQL_CHARS:
            raise QueryTooLarge(f"query too large: its SQL would exceed {MAX_SQL_CHARS} characters")
        return sql

    def _query(self, node: SpansetQuery) -> str:
        if isinstance(node, Spanset):
            return self.span(node.condition) if node.condition is not None else "1"
        left, right = self.query(node.left), self.query(node.right)
        if node.operator == "||":
            return f"(({left}) OR ({right}))"
        if node.operator == "&&":
            return f"((({left}) AND {_traces_with(right)}) OR (({right}) AND {_traces_with(left)}))"
        walk = f"below_{next(self._names)}"
        return f"""(({right}) AND (TraceId, SpanId) IN (
    WITH RECURSIVE {walk} AS (
        SELECT TraceId, SpanId, 0 AS depth FROM otel_traces WHERE {TENANT_FILTER} AND ({left})
        UNION ALL
        SELECT child.TraceId, child.SpanId, {walk}.depth + 1
        FROM otel_traces AS child
        INNER JOIN {walk} ON child.TraceId = {walk}.TraceId AND child.ParentSpanId = {walk}.SpanId
        WHERE {TENANT_FILTER} AND {walk}.depth < {MAX_DEPTH}
    )
    SELECT TraceId, SpanId FROM {walk} WHERE depth > 0
))"""

    def span(self, node: SpanCondition) -> str:
        if isinstance(node, Comparison):
            return self.comparison(node)
        joiner = "AND" if isinstance(node, SpanAnd) else "OR"
        return f"({self.span(node.left)} {joiner} {self.span(node.right)})"

    def comparison(self, node: Comparison) -> str:
        operator = _OPERATORS[node.operator]
        field = node.field
        if field.scope == "intrinsic" and field.name == "duration":
            return f"Duration {operator} {self.bind(int(node.value), 'UInt64')}"
        if field.scope == "intrinsic":
            column, sql_type = _INTRINSICS[field.name]
            return f"{column} {operator} {self.bind(str(node.value), sql_type)}"
        value = self._value(node.value)
        if field.name == "service.name" and field.scope in ("resource", "any"):
            return f"(ServiceName {operator} {value[0]})" if value[1] == "String" else "0"
        return "(" + " OR ".join(self._attribute(column, field, operator, value) for column in _MAPS[field.scope]) + ")"

    def _value(self, value: Value) -> tuple[str, str]:
        """The bound parameter of a literal and whether it compares as text (``String``) or as a number."""
        if isinstance(value, bool):
            return self.bind("true" if value else "false", "String"), "String"
        if isinstance(value, int | float):
            return self.bind(float(value), "Float64"), "Float64"
        return self.bind(value, "String"), "String"

    def _attribute(self, column: str, field: Field, operator: str, value: tuple[str, str]) -> str:
        key = self.bind(field.name, "String")
        read = f"{column}[{key}]" if value[1] == "String" else f"toFloat64OrNull({column}[{key}])"
        return f"(mapContains({column}, {key}) AND {read} {operator} {value[0]})"


def _traces_with(condition: str) -> str:
    return f"TraceId IN (SELECT TraceId FROM otel_traces WHERE {TENANT_FILTER} AND ({condition}))"


def span_condition(query: SpansetQuery) -> tuple[str, dict[str, object]]:
    """The row condition of the spans ``query`` returns and its bound parameters (``tq_*``; the tenant's come from
    :func:`storage.tenancy.tenant_parameters`, as every trace read's). The SQL holds parameter braces: insert it into
    a ``str.format`` template as a field value.

    Raises:
        QueryTooLarge: the SQL would exceed :data:`MAX_SQL_CHARS`.
    """
    compiler = _Compiler()
    return compiler.query(query), compiler.parameters
