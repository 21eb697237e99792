"""A recursive-descent parser for the TraceQL subset Hotspan answers (:mod:`storage.traceql` has the tree).

Grammar (precedence low to high; Tempo's spelling, https://grafana.com/docs/tempo/latest/traceql/)::

    query      := or_sets EOF
    or_sets    := and_sets ("||" and_sets)*
    and_sets   := structural ("&&" structural)*
    structural := spanset (">>" spanset)*
    spanset    := "{" [condition] "}" | "(" or_sets ")"
    condition  := conjunct ("||" conjunct)*
    conjunct   := test ("&&" test)*
    test       := "(" condition ")" | field OP literal
    field      := span.KEY | resource.KEY | .KEY | name | status | kind | duration
    literal    := "string" | number | duration (ns, us, µs, ms, s, m, h) | true | false | status/kind keyword

Anything else (pipelines ``| count()``, ``>``, ``~``, ``<<``, regex ``=~``, ``nil``, other intrinsics, ``event.``
scopes...) raises :class:`TraceQLError` naming the part, which the API answers as a 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from query.store import (
    Comparison,
    Field,
    Operator,
    SpanAnd,
    SpanCondition,
    SpanOr,
    Spanset,
    SpansetOp,
    SpansetQuery,
    Value,
)

MAX_QUERY_CHARS = 4096
"""Longest ``q`` parsed: a longer one is refused before tokenizing."""
MAX_TERMS = 64
"""Most comparisons plus spansets one query may hold: each adds SQL (``storage.reader.MAX_ATTRIBUTE_FILTERS``)."""

MAX_NESTING = 32
"""Deepest nesting of parentheses: the parser recurses per level."""

_DURATION_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000}
_DURATION_UNITS["h"] = 60 * _DURATION_UNITS["m"]
_STATUSES = {"ok": "Ok", "error": "Error", "unset": "Unset"}
_KINDS = {k: k.capitalize() for k in ("server", "client", "producer", "consumer", "internal", "unspecified")}
_INTRINSICS = ("name", "status", "kind", "duration")

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<duration>\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h)\b)
  | (?P<number>-?\d+(?:\.\d+)?\b)
  | (?P<field>(?:span|resource)?\.[A-Za-z0-9_.\-/:]+|(?:span|resource)\.\"(?:[^"\\]|\\.)*\")
  | (?P<word>[A-Za-z_][A-Za-z0-9_:]*)
  | (?P<op>&&|\|\||>>|!=|>=|<=|=~|!~|!>>|<<|!<<|~|!~|=|>|<|\{|\}|\(|\)|\||!)
    """,
    re.VERBOSE,
)


class TraceQLError(ValueError):
    """A ``q`` outside the subset, or malformed: the message says which part, as Tempo's parse errors do."""


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    column: int


def _tokens(text: str) -> list[_Token]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise TraceQLError(f"parse error at col {position + 1}: unexpected character {text[position]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append(_Token(kind, match.group(), position + 1))
        position = match.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.position = 0
        self.terms = 0
        self.depth = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.position]

    def take(self, text: str) -> bool:
        if self.current.kind == "op" and self.current.text == text:
            self.position += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.take(text):
            raise self.unexpected(f"expected {text!r}")

    def unexpected(self, wanted: str) -> TraceQLError:
        token = self.current
        found = "end of query" if token.kind == "end" else repr(token.text)
        unsupported = {
            "|": "pipelines (| count(), | select(), ...)",
            ">": "the child operator >",
            "~": "the sibling operator ~",
            "<<": "the ancestor operator <<",
            "=~": "regular expressions (=~)",
            "!~": "regular expressions (!~)",
            "!>>": "negated structural operators",
            "!<<": "negated structural operators",
            "!": "negation (!)",
        }
        if token.kind == "op" and token.text in unsupported:
            return TraceQLError(f"unsupported TraceQL at col {token.column}: {unsupported[token.text]}")
        return TraceQLError(f"parse error at col {token.column}: {wanted}, found {found}")

    def open_parenthesis(self) -> bool:
        if not self.take("("):
            return False
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise TraceQLError(f"query too deep: more than {MAX_NESTING} nested parentheses")
        return True

    def close_parenthesis(self) -> None:
        self.expect(")")
        self.depth -= 1

    def count_term(self) -> None:
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise TraceQLError(f"query too large: more than {MAX_TERMS} conditions")

    def query(self) -> SpansetQuery:
        node = self.or_sets()
        if self.current.kind != "end":
            raise self.unexpected("expected && || or >> between spansets")
        return node

    def or_sets(self) -> SpansetQuery:
        node = self.and_sets()
        while self.take("||"):
            node = SpansetOp("||", node, self.and_sets())
        return node

    def and_sets(self) -> SpansetQuery:
        node = self.structural()
        while self.take("&&"):
            node = SpansetOp("&&", node, self.structural())
        return node

    def structural(self) -> SpansetQuery:
        node = self.spanset()
        while self.take(">>"):
            node = SpansetOp(">>", node, self.spanset())
        return node

    def spanset(self) -> SpansetQuery:
        if self.open_parenthesis():
            node = self.or_sets()
            self.close_parenthesis()
            return node
        if not self.take("{"):
            raise self.unexpected("expected '{'")
        self.count_term()
        if self.take("}"):
            return Spanset(None)
        condition = self.condition()
        self.expect("}")
        return Spanset(condition)

    def condition(self) -> SpanCondition:
        node = self.conjunct()
        while self.take("||"):
            node = SpanOr(node, self.conjunct())
        return node

    def conjunct(self) -> SpanCondition:
        node = self.test()
        while self.take("&&"):
            node = SpanAnd(node, self.test())
        return node

    def test(self) -> SpanCondition:
        if self.open_parenthesis():
            node = self.condition()
            self.close_parenthesis()
            return node
        self.count_term()
        field = self.field()
        token = self.current
        if token.kind != "op" or token.text not in ("=", "!=", ">", ">=", "<", "<="):
            raise self.unexpected("expected a comparison (= != > >= < <=)")
        self.position += 1
        operator: Operator = token.text  # type: ignore[assignment]
        return Comparison(field, operator, self.literal(field, operator))

    def field(self) -> Field:
        token = self.current
        self.position += 1
        if token.kind == "field":
            scope, _, key = token.text.partition(".")
            if key.startswith('"'):
                key = _unquote(key)
            if not key:
                raise TraceQLError(f"parse error at col {token.column}: empty attribute name")
            return Field("any" if scope == "" else scope, key)  # type: ignore[arg-type]
        if token.kind == "word" and token.text in _INTRINSICS:
            return Field("intrinsic", token.text)
        self.position -= 1
        if token.kind == "word":
            raise TraceQLError(
                f"unsupported TraceQL at col {token.column}: {token.text!r}; fields are span.*, resource.*, .*, "
                f"{', '.join(_INTRINSICS)}"
            )
        raise self.unexpected("expected a field")

    def literal(self, field: Field, operator: Operator) -> Value:
        token = self.current
        self.position += 1
        name = field.name if field.scope == "intrinsic" else ""
        if name == "duration":
            if token.kind != "duration":
                raise TraceQLError(f"parse error at col {token.column}: duration needs a value like 100ms, 1.5s")
            number, unit = re.fullmatch(r"([\d.]+)(\D+)", token.text).groups()  # type: ignore[union-attr]
            return round(float(number) * _DURATION_UNITS[unit])
        if name in ("status", "kind"):
            keywords = _STATUSES if name == "status" else _KINDS
            if token.kind != "word" or token.text not in keywords or operator not in ("=", "!="):
                raise TraceQLError(
                    f"parse error at col {token.column}: {name} compares with = or != to one of {', '.join(keywords)}"
                )
            return keywords[token.text]
        if token.kind == "string":
            return _unquote(token.text)
        if name == "name":
            raise TraceQLError(f"parse error at col {token.column}: name compares with a quoted string")
        if token.kind == "number":
            text = token.text
            return float(text) if "." in text else int(text)
        if token.kind == "word" and token.text in ("true", "false"):
            return token.text == "true"
        self.position -= 1
        raise self.unexpected("expected a value (a quoted string, number, true or false)")


def _unquote(quoted: str) -> str:
    """The text of a TraceQL string literal: ``\\"`` and ``\\\\`` escapes as in Go's strconv."""
    return re.sub(r"\\(.)", r"\1", quoted[1:-1])


def parse(text: str) -> SpansetQuery:
    """The tree of TraceQL ``text``; an empty or blank query is ``{ }`` (every span, as Grafana's default).

    Raises:
        TraceQLError: outside the subset or malformed; the message names the column and the part.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise TraceQLError(f"query too long: more than {MAX_QUERY_CHARS} characters")
    if not text.strip():
        return Spanset(None)
    return _Parser(text).query()


def fields_of(query: SpansetQuery) -> tuple[Field, ...]:
    """The fields ``query`` compares, each once, in the order written: what Tempo shows beside a matched span."""
    found: dict[Field, None] = {}

    def walk(node: SpansetQuery | SpanCondition | None) -> None:
        if isinstance(node, Comparison):
            found[node.field] = None
        elif isinstance(node, Spanset):
            walk(node.condition)
        elif isinstance(node, SpanAnd | SpanOr | SpansetOp):
            walk(node.left)
            walk(node.right)

    walk(query)
    return tuple(found)
