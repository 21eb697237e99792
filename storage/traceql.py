"""The TraceQL subset Hotspan answers, as a small syntax tree: what :mod:`api.tempo.traceql` parses a ``q`` into and
:mod:`storage.traceql_sql` turns into bound-parameter SQL.

Shapes (Tempo's TraceQL, https://grafana.com/docs/tempo/latest/traceql/):

- a :class:`Comparison` of one span :class:`Field` with a literal: ``span.http.method = "GET"``,
  ``resource.service.name = "cart"``, ``.db.system = "redis"`` (either scope), ``name``, ``status``, ``kind``,
  ``duration`` (values in **nanoseconds**);
- :class:`SpanAnd` / :class:`SpanOr` of comparisons within one spanset ``{ ... }`` (one span meets them);
- :class:`Spanset`: ``{ ... }``, ``{ }`` for every span;
- :class:`SpansetOp` between spansets: ``&&`` (the trace has spans of both), ``||`` (of either), ``>>`` (a span
  of the right side below a span of the left side, at any depth).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["span", "resource", "any", "intrinsic"]
"""Where a field is read: span attributes, resource attributes, either (``.attr``), or a span column."""

Operator = Literal["=", "!=", ">", ">=", "<", "<="]

Value = str | int | float | bool


@dataclass(frozen=True)
class Field:
    """A span field: ``scope`` and ``name`` (an attribute key, or ``name``/``status``/``kind``/``duration`` for
    ``intrinsic``)."""

    scope: Scope
    name: str


@dataclass(frozen=True)
class Comparison:
    """``field operator value``. ``duration`` values are ns ints; ``status`` values ``Ok``/``Error``/``Unset`` and
    ``kind`` values ``Server``/``Client``/... as storage spells them."""

    field: Field
    operator: Operator
    value: Value


@dataclass(frozen=True)
class SpanAnd:
    left: SpanCondition
    right: SpanCondition


@dataclass(frozen=True)
class SpanOr:
    left: SpanCondition
    right: SpanCondition


SpanCondition = Comparison | SpanAnd | SpanOr
"""What one span must meet, within a spanset."""


@dataclass(frozen=True)
class Spanset:
    """``{ condition }``; ``condition`` None for ``{ }`` (every span)."""

    condition: SpanCondition | None


@dataclass(frozen=True)
class SpansetOp:
    """``left op right`` between spansets."""

    operator: Literal["&&", "||", ">>"]
    left: SpansetQuery
    right: SpansetQuery


SpansetQuery = Spanset | SpansetOp
"""A whole TraceQL query of the subset."""
