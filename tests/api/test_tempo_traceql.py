"""The TraceQL parser (``api.tempo.traceql``) and its SQL (``storage.traceql_sql``): the trees of Tempo's own
documented examples (https://grafana.com/docs/tempo/latest/traceql/), and SQL that carries every user string as a
bound parameter."""

from __future__ import annotations

import pytest

from api.tempo.traceql import TraceQLError, parse
from storage.trace_sql import TENANT_FILTER
from storage.traceql import Comparison, Field, SpanAnd, SpanOr, Spanset, SpansetOp
from storage.traceql_sql import span_condition


def _equals(scope: str, name: str, value: object) -> Comparison:
    return Comparison(Field(scope, name), "=", value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("", Spanset(None)),
        ("{ }", Spanset(None)),
        ('{ span.http.method = "GET" }', Spanset(_equals("span", "http.method", "GET"))),
        (
            '{ resource.service.name = "api" && status = error }',
            Spanset(SpanAnd(_equals("resource", "service.name", "api"), _equals("intrinsic", "status", "Error"))),
        ),
        (
            "{ .http.status_code >= 500 || duration > 1.5s }",
            Spanset(
                SpanOr(
                    Comparison(Field("any", "http.status_code"), ">=", 500),
                    Comparison(Field("intrinsic", "duration"), ">", 1_500_000_000),
                )
            ),
        ),
        ('{ span."a b" != true }', Spanset(Comparison(Field("span", "a b"), "!=", True))),
        (
            '{ kind = server } >> { name = "db" } || { duration < 10us }',
            SpansetOp(
                "||",
                SpansetOp(
                    ">>", Spanset(_equals("intrinsic", "kind", "Server")), Spanset(_equals("intrinsic", "name", "db"))
                ),
                Spanset(Comparison(Field("intrinsic", "duration"), "<", 10_000)),
            ),
        ),
        ("({ } && { })", SpansetOp("&&", Spanset(None), Spanset(None))),
    ],
)
def test_trees_of_documented_queries(text: str, tree: object) -> None:
    assert parse(text) == tree


def test_user_strings_travel_as_parameters_only() -> None:
    hostile = "x' OR 1=1 --{tenant:String}"
    sql, parameters = span_condition(parse(f'{{ span."{hostile}" = "{hostile}" }} >> {{ name = "{hostile}" }}'))
    assert hostile not in sql and "OR 1=1" not in sql
    assert set(parameters.values()) == {hostile}
    assert sql.count(TENANT_FILTER) == 2  # the recursive walk's anchor and its step


def test_numbers_compare_as_numbers_and_strings_as_text() -> None:
    sql, parameters = span_condition(parse("{ span.n > 5 }"))
    assert "toFloat64OrNull(SpanAttributes[{tq_1:String}]) > {tq_0:Float64}" in sql and parameters["tq_0"] == 5.0
    sql, _ = span_condition(parse('{ resource.service.name != "a" }'))
    assert sql == "(ServiceName != {tq_0:String})"


@pytest.mark.parametrize(
    "text", ["{ .a = }", "{ .a 1 }", "{ } {", "{ name = 1 }", "{ duration > 5 }", "{ kind > server }"]
)
def test_malformed_queries_raise(text: str) -> None:
    with pytest.raises(TraceQLError):
        parse(text)
