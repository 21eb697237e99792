"""Payload redaction at ingest: secrets and personal data masked in message attributes before they are stored.

LLM instrumentations record the conversation itself as span attributes and span event attributes: the GenAI
semantic conventions' ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (and the deprecated
``gen_ai.prompt`` / ``gen_ai.completion`` with their events), OpenInference's ``input.value``, ``output.value`` and
``llm.input_messages.*`` / ``llm.output_messages.*``. Users paste e-mail addresses, API keys and card numbers into
those. A :class:`RedactionTable` (YAML; the packaged ``collector/redaction.yaml`` is the default) names the
attribute keys to look at, the span events whose every attribute is content (the deprecated GenAI message events
keep it under ``content``), and the rules to apply, in order; every match becomes ``[REDACTED:<rule>]``, and a
span that had something masked carries :data:`REDACTED_KEY` with the number of matches masked in its attributes
and its events' attributes. ``HOTSPAN_REDACTION`` picks the table (:func:`load_redaction`): unset or ``default`` the
packaged one, ``off`` none, else a file::

    version: 1
    defaults: true               # keep the packaged keys and rules, add these (false: only these)
    keys: ["app.user_note", "myco.ticket.*"]   # attribute keys; `*` any run, 6+ literal characters first
    events: ["myco.chat.turn"]   # span events whose every attribute is redacted (same syntax)
    rules:                       # a rule named like a packaged one replaces it
      - name: employee_id        # [a-z][a-z0-9_]*: the marker's and the metric's label
        pattern: '\\bEMP-\\d{6}\\b'  # RE2 and Python syntax alike
      - name: card_number
        pattern: '\\b(?:\\d[ -]?){12,18}\\d\\b'
        check: luhn              # mask only matches whose digits pass the Luhn checksum

How it runs (:class:`Redactor`). The served path redacts a request when it converts it for the insert
(``collector.native_writer.RequestConverter``), where the compiled scanner reads it:

1. The scanner, as it walks the request, tests every span and span-event attribute key against the literal starts
   of the key patterns, and every event name against those of the event-name patterns
   (:attr:`Redactor.named_keys`, :attr:`Redactor.named_events`: a binary search per key); a request with none
   is converted as it is, so spans without message attributes cost those searches (``benchmarks/redaction.py``).
   Whole literals, not shorter shared parts: a part such as ``gen_ai.c`` also begins ``gen_ai.conversation.id``,
   and every request it matched would be parsed for nothing.
2. A request that holds one is parsed (:meth:`Redactor.redact_body`), and so is one that the scanner leaves to the
   Python reference before it reached the end (its first anomaly came first) when its bytes hold a literal start
   anywhere (:meth:`Redactor.may_name`: one RE2 pass); the string leaves of the named attributes' values (nested
   array and key-value values included: the semantic conventions allow structured messages) are gathered into one
   Arrow column, each rule runs over that column at once (RE2 through ``pyarrow.compute``; a rule with a ``check``
   tests only the values RE2 matched, in Python), the changed values are written back, and the request is
   serialized again.

``hotspan import`` (``hotspan.importer``) calls :meth:`Redactor.redact_request` on each decoded request, so a
file imports redacted as the same spans sent over OTLP would be stored. The spool and the dead-letter directory
hold requests as received (they are the collector's own files in its data directory, deleted once stored); what
reaches ClickHouse is redacted. Redaction is deterministic, so a request stored again after a retry compares
equal to its first copy (``storage.writer.OnceWriter``).

Sources: OpenTelemetry semantic conventions for generative AI (``gen-ai-spans.md``, ``gen-ai-events.md``, v1.37);
OpenInference semantic conventions (``spec/semantic_conventions.md``); the Luhn checksum (ISO/IEC 7812-1, annex B).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from analysis.rule_files import RuleFileError, read_packaged_rules, read_rule_file, validate_rules

REDACTED_KEY = "hotspan.redacted"
"""Span attribute set on a span that had something masked: the number of matches masked in its attributes and its
events' attributes (an integer)."""

OFF = "off"
DEFAULT = "default"
DEFAULT_RESOURCE = "redaction.yaml"

MIN_LITERAL_CHARS = 6
"""Literal characters a key pattern must start with: the prefilter searches request bytes for them, and a shorter
needle would match nearly every request."""

KEY_CACHE = 65_536
"""Attribute keys whose decision a :class:`Redactor` remembers."""


def marker(rule: str) -> str:
    """What a match of ``rule`` is replaced with: ``[REDACTED:<rule>]``."""
    return f"[REDACTED:{rule}]"


class RedactionRule(BaseModel):
    """One pattern and what each match becomes (:func:`marker`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=40)
    pattern: str = Field(min_length=1)
    check: Literal["luhn"] | None = None

    @field_validator("pattern")
    @classmethod
    def _both_engines(cls, pattern: str) -> str:
        try:
            found = re.compile(pattern).search("")
        except re.error as exc:
            raise ValueError(f"not a Python regular expression: {exc}") from None
        try:
            pc.match_substring_regex(pa.nulls(1, pa.string()), pattern)
        except pa.ArrowInvalid as exc:
            raise ValueError(f"not an RE2 regular expression: {exc}") from None
        if found is not None:
            raise ValueError("matches the empty string (it would mark every value)")
        return pattern


class RedactionTable(BaseModel):
    """The attribute keys to redact and the rules, in order (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(default=1, ge=1, le=1)
    defaults: bool = True
    keys: list[str] = Field(default_factory=list)
    events: list[str] = Field(default_factory=list)
    """Span event names (same ``*`` syntax as ``keys``) whose every attribute is message content: the deprecated
    GenAI message events keep it under plain keys (``content``, ``message``) too common to name on their own."""
    rules: list[RedactionRule] = Field(default_factory=list)

    @field_validator("keys", "events")
    @classmethod
    def _literal_start(cls, keys: list[str]) -> list[str]:
        short = [key for key in keys if len(key.split("*", 1)[0]) < MIN_LITERAL_CHARS]
        if short:
            raise ValueError(f"names must start with {MIN_LITERAL_CHARS}+ characters before any '*': {short}")
        return keys

    @model_validator(mode="after")
    def _unique_names(self) -> RedactionTable:
        names = [rule.name for rule in self.rules]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"rule names repeat: {repeated}")
        return self

    def over(self, base: RedactionTable) -> RedactionTable:
        """This table added to ``base`` (its keys, its rules, a rule of the same name replaced in place), or this
        table alone when it says ``defaults: false``."""
        if not self.defaults:
            return self
        mine = {rule.name: rule for rule in self.rules}
        rules = [mine.pop(rule.name, rule) for rule in base.rules] + list(mine.values())
        return RedactionTable(
            keys=list(dict.fromkeys(base.keys + self.keys)),
            events=list(dict.fromkeys(base.events + self.events)),
            rules=rules,
        )


class RedactionRulesError(RuleFileError):
    """A redaction table is invalid. ``issues`` lists every problem as ``"<key path>: <message>"``."""

    table = "redaction rules"


def parse_redaction_table(document: object, origin: str = "<document>") -> RedactionTable:
    """Validate a parsed YAML/JSON document as a redaction table (an empty document is an empty table).

    Raises:
        RedactionRulesError: every problem, each under its key path.
    """
    return validate_rules(RedactionTable, document or {}, origin, RedactionRulesError)


def packaged_table() -> RedactionTable:
    """The packaged default table, ``collector/redaction.yaml``."""
    return parse_redaction_table(*read_packaged_rules("collector", DEFAULT_RESOURCE))


def load_redaction(setting: str | Path) -> RedactionTable | None:
    """The table ``HOTSPAN_REDACTION`` selects: ``default`` (or empty) the packaged one, ``off`` none, else the
    YAML file at that path (over the packaged one unless it says ``defaults: false``).

    Raises:
        RedactionRulesError: the file cannot be read, is not YAML, or breaks the schema (every problem listed).
    """
    text = str(setting).strip()
    if text.lower() == OFF:
        return None
    if text.lower() in ("", DEFAULT):
        return packaged_table()
    table = parse_redaction_table(read_rule_file(text, RedactionRulesError), text)
    return table.over(packaged_table())


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum (ISO/IEC 7812-1): from the right, every second digit
    doubled (its digits summed), the total a multiple of 10."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_number(text: str) -> bool:
    """Whether a match is a payment card number: 13-19 digits (ISO/IEC 7812) whose Luhn checksum holds."""
    digits = "".join(char for char in text if char.isdigit())
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


CHECKS: dict[str, Callable[[str], bool]] = {"luhn": _card_number}
"""A rule's ``check``: what a match must also pass to be masked."""


def literal_starts(names: Sequence[str]) -> tuple[bytes, ...]:
    """The literal starts (the UTF-8 text before the first ``*``) of ``names``, sorted bytewise, each dropped that
    another begins: a name none of them begins matches none of ``names``. The scanner's form
    (``collector._otlp_rows.convert``'s ``named_keys`` and ``named_events``)."""
    kept: list[bytes] = []
    for literal in sorted({name.split("*", 1)[0].encode() for name in names}):
        if not kept or not literal.startswith(kept[-1]):
            kept.append(literal)
    return tuple(kept)


class Redactor:
    """Applies a :class:`RedactionTable` to OTLP requests (module docstring). Thread-safe (holds no state
    between calls but a cache of key decisions); blocking, CPU-bound.

    Args:
        table: the keys and rules.
    """

    def __init__(self, table: RedactionTable) -> None:
        self.table = table
        self.named_keys = literal_starts(table.keys)
        """The literal starts of the key patterns (:func:`literal_starts`): a key none begins is not redacted."""
        self.named_events = literal_starts(table.events)
        """The literal starts of the event-name patterns: an event none begins is not redacted whole."""
        self._literals = "|".join(re.escape(literal.decode()) for literal in self.named_keys + self.named_events)
        self._keys = re.compile(_whole(table.keys))
        self._events = re.compile(_whole(table.events))
        self._python = [re.compile(rule.pattern) for rule in table.rules]
        # Decisions by key, one dict lookup per attribute walked (thread-safe: a race only computes one decision
        # twice); bounded, as keys are the sender's to invent.
        self._decided: dict[str, bool] = {}

    @property
    def key_regex(self) -> str:
        """The table's key patterns as one RE2 (and Python) expression matching a whole key (nothing when none):
        what :meth:`wanted` matches and ``storage.payloads`` deletes."""
        return self._keys.pattern

    @property
    def event_regex(self) -> str:
        """The table's event-name patterns as one RE2 expression matching a whole name (nothing when none)."""
        return self._events.pattern

    def wanted(self, key: str) -> bool:
        """Whether an attribute ``key`` is one the table names."""
        decided = self._decided.get(key)
        if decided is None:
            decided = self._keys.fullmatch(key) is not None
            if len(self._decided) < KEY_CACHE:
                self._decided[key] = decided
        return decided

    def wanted_event(self, name: str) -> bool:
        """Whether every attribute of a span event called ``name`` is redacted."""
        return self._events.fullmatch(name) is not None

    def may_name(self, body: bytes) -> bool:
        """Whether a serialized request's bytes hold a literal start of a key or event-name pattern anywhere (one
        RE2 pass, ``pyarrow.compute``): False means it holds no key or event the table names. For requests the
        scanner does not walk to the end (:func:`collector.native_writer.native_rows`)."""
        return (
            bool(self._literals) and pc.match_substring_regex(pa.array([body], pa.binary()), self._literals)[0].as_py()
        )

    def redact_body(self, body: bytes) -> tuple[bytes | None, Counter[str]]:
        """A serialized ``ExportTraceServiceRequest`` redacted, and the matches masked per rule: the same object when
        nothing was masked, None when protobuf cannot read it (the writer then reports it, and stores none of it)."""
        try:
            request = ExportTraceServiceRequest.FromString(body)
        except (DecodeError, RecursionError):
            return None, Counter()
        counts = self.redact_request(request)
        return (request.SerializeToString(), counts) if counts else (body, counts)

    def redact_request(self, request: ExportTraceServiceRequest) -> Counter[str]:
        """Mask in place every rule's matches in the named attributes of ``request``'s spans and span events, mark
        the spans concerned (:data:`REDACTED_KEY`); the matches masked per rule (empty: ``request`` unchanged)."""
        leaves: list[AnyValue] = []
        owners: list[int] = []
        spans = []
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    before = len(leaves)
                    self._gather(span.attributes, leaves)
                    for event in span.events:
                        if self.wanted_event(event.name):
                            for kv in event.attributes:
                                _string_leaves(kv.value, leaves)
                        else:
                            self._gather(event.attributes, leaves)
                    if len(leaves) > before:
                        owners += [len(spans)] * (len(leaves) - before)
                        spans.append(span)
        if not leaves:
            return Counter()
        texts, hits, masked = self.redact_texts([leaf.string_value for leaf in leaves])
        per_span = [0] * len(spans)
        for leaf, text, count, owner in zip(leaves, texts, hits, owners, strict=True):
            if count:
                leaf.string_value = text
                per_span[owner] += count
        for span, count in zip(spans, per_span, strict=True):
            if count:
                _set_int(span.attributes, REDACTED_KEY, count)
        return masked

    def redact_texts(self, texts: Sequence[str]) -> tuple[list[str], list[int], Counter[str]]:
        """Every rule, in order, over ``texts`` as one Arrow column.

        Returns:
            The texts with matches masked, the matches masked in each, and the matches masked per rule.
        """
        values = pa.array(texts, pa.large_string())
        hits = [0] * len(texts)
        masked: Counter[str] = Counter()
        for rule, compiled in zip(self.table.rules, self._python, strict=True):
            if rule.check is None:
                counts = pc.count_substring_regex(values, rule.pattern)
                total = pc.sum(counts).as_py()
                if not total:
                    continue
                values = pc.replace_substring_regex(values, rule.pattern, marker(rule.name))
                hits = [a + b for a, b in zip(hits, counts.to_pylist(), strict=True)]
                masked[rule.name] += total
                continue
            matched = pc.match_substring_regex(values, rule.pattern)
            rows = pc.indices_nonzero(matched).to_pylist()
            if not rows:
                continue
            current = values.to_pylist()
            for row in rows:
                text, count = _checked_sub(compiled, marker(rule.name), CHECKS[rule.check], current[row])
                current[row] = text
                hits[row] += count
                masked[rule.name] += count
            values = pa.array(current, pa.large_string())
        return values.to_pylist(), hits, masked

    def _gather(self, attributes: Iterable[KeyValue], leaves: list[AnyValue]) -> None:
        for kv in attributes:
            if self.wanted(kv.key):
                _string_leaves(kv.value, leaves)


NOTHING = r"[^\s\S]"
"""An expression no string matches (RE2 has no look-ahead to write it otherwise)."""


def _whole(names: Sequence[str]) -> str:
    """``names`` as one anchored expression (``^(?:...)$``, ``*`` standing for any run of characters), RE2 and
    Python alike; :data:`NOTHING` when there are none."""
    if not names:
        return NOTHING
    return "^(?:" + "|".join(".*".join(map(re.escape, name.split("*"))) for name in names) + ")$"


def _string_leaves(value: AnyValue, leaves: list[AnyValue]) -> None:
    """Append the string values in ``value``, at any depth of arrays and key-value lists."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        leaves.append(value)
    elif kind == "array_value":
        for item in value.array_value.values:
            _string_leaves(item, leaves)
    elif kind == "kvlist_value":
        for kv in value.kvlist_value.values:
            _string_leaves(kv.value, leaves)


def _checked_sub(
    compiled: re.Pattern[str], replacement: str, check: Callable[[str], bool], text: str
) -> tuple[str, int]:
    """``text`` with the matches of ``compiled`` that pass ``check`` replaced; and how many were."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        if not check(match.group()):
            return match.group()
        count += 1
        return replacement

    return compiled.sub(replace, text), count


def _set_int(attributes: Sequence[KeyValue], key: str, value: int) -> None:
    """Set ``key`` to the integer ``value`` in an attribute list, replacing a value the sender gave it."""
    for kv in attributes:
        if kv.key == key:
            kv.value.Clear()
            kv.value.int_value = value
            return
    attributes.add(key=key).value.int_value = value  # type: ignore[attr-defined]


__all__ = [
    "REDACTED_KEY",
    "RedactionRule",
    "RedactionRulesError",
    "RedactionTable",
    "Redactor",
    "literal_starts",
    "load_redaction",
    "luhn_valid",
    "marker",
    "packaged_table",
    "parse_redaction_table",
]
