"""SQL-injection payloads for every filter parameter of the REST and Jaeger APIs.

Hotspan binds every user value as a ClickHouse query parameter (``{name:Type}``), so none of these should do
anything but fail to match, or fail to parse with a 400. The corpus aims at the ways that could break:
quote and comment breaking (classic), ClickHouse's own syntax (``{name:Type}`` placeholders that a naive
pre-formatter would substitute, backslash escapes inside string literals, table functions, ``SETTINGS``,
``FORMAT``), look-alike quotes that a normaliser might fold to ``'``, ``str.format`` / printf braces (the query
builder uses ``str.format`` on fixed templates), control characters including NUL, and the other tenants'
names and IDs themselves (a search by another tenant's service must find nothing).

Every payload goes through every input with ``HOTSPAN_SECURITY_CORPUS=all``; by default (CI's time) through a
quarter of them (:func:`spread`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

from security_support import BETA_TRACE, DEFAULT_TRACE, SHARED_TRACE

Input = TypeVar("Input")

CLASSIC = (
    "'",
    '"',
    "''",
    "' OR '1'='1",
    "' OR 1=1 --",
    "' OR 1=1 #",
    "' OR 1=1 /*",
    '" OR ""="',
    '" OR 1=1 --',
    "') OR ('1'='1",
    "')) OR (('1'='1",
    "' OR 'x'='x' --",
    "1' ORDER BY 1 --",
    "1' ORDER BY 100 --",
    "' UNION SELECT NULL --",
    "' UNION SELECT 1,2,3 --",
    "'; DROP TABLE otel_traces; --",
    "'; TRUNCATE TABLE otel_traces; --",
    "'; DELETE FROM otel_traces WHERE 1; --",
    "admin' --",
    "' AND SLEEP(5) --",
    "1; SELECT 1",
    "1 OR 1=1",
    "1) OR (1=1",
    "x' AND 1=0 UNION ALL SELECT 'a',2 --",
    "'||'",
    "' + '",
    "'--",
    "' #",
    "';",
    "%' --",
    "' OR '' = '",
    "' OR 1 IN (SELECT 1) --",
    "' HAVING 1=1 --",
    "' GROUP BY 1 --",
    "1' AND '1'='1",
    "-1' UNION SELECT version() --",
)

CLICKHOUSE = (
    "{tenant:String}",
    "{all_tenants:Bool}",
    "{service:String}",
    "{limit:UInt32}",
    "{trace_id:String}",
    "{attr_key_0:String}",
    "{x:Identifier}",
    "{tenant:Identifier}",
    "' OR {all_tenants:Bool} OR '",
    "') OR {all_tenants:Bool} OR ('",
    "' OR Tenant != '' OR '",
    "') OR Tenant != ('",
    "' OR if(Tenant = '', 'default', Tenant) = 'beta' OR '",
    "' UNION ALL SELECT TraceId FROM otel_traces --",
    "' UNION ALL SELECT ServiceName, SpanName FROM otel_traces WHERE Tenant = 'beta' --",
    "x' AND (SELECT count() FROM otel_traces WHERE Tenant = 'beta') > 0 --",
    "' FORMAT JSON --",
    "' FORMAT TabSeparated",
    "' SETTINGS readonly = 0 --",
    "' SETTINGS max_execution_time = 0.000001 --",
    "' INTO OUTFILE '/tmp/hotspan-injected' --",
    "file('/etc/passwd')",
    "' || (SELECT * FROM file('/etc/passwd', 'LineAsString') LIMIT 1) || '",
    "url('http://127.0.0.1:1/x', 'CSV', 'a String')",
    "remote('127.0.0.1', system.one)",
    "' || (SELECT name FROM system.databases LIMIT 1) || '",
    "system.tables",
    "'; SYSTEM SHUTDOWN; --",
    "'; KILL QUERY WHERE 1; --",
    "'; ALTER TABLE otel_traces DELETE WHERE 1; --",
    "'; CREATE TABLE pwned (x UInt8) ENGINE = Memory; --",
    "\\'",
    "\\\\'",
    "\\' OR 1=1 --",
    "\\\\' OR 1=1 --",
    "\\",
    "\\\\",
    "x\\",
    "\\N",
    "NULL",
    "\\0",
    "$$ OR 1=1 $$",
    "$tag$ OR 1=1 $tag$",
    "`",
    "` OR 1=1 --",
    "`otel_traces`",
    "x'::String OR 1=1 --",
    "' OR ServiceName LIKE '%",
    "' OR match(ServiceName, '.*') OR '",
    "%",
    "_",
    "%%",
    ".*",
    "^beta",
    "0x27",
    "char(39)",
    "'/*",
    "*/",
    "-- ",
    "#",
    ";",
    "*",
    "ALL",
    "ANY",
    "0",
    "-1",
    "1e309",
    "18446744073709551616",
    "-9223372036854775809",
)

UNICODE = (
    "\u2018",  # left single quotation mark
    "\u2019",  # right single quotation mark
    "\u201a",
    "\u201b",
    "\u201c",
    "\u201d",
    "\u201e",
    "\u2032",  # prime
    "\u2033",
    "\uff07",  # fullwidth apostrophe
    "\uff02",  # fullwidth quotation mark
    "\u02bc",  # modifier letter apostrophe
    "\u02c8",
    "\u00b4",  # acute accent
    "\uff40",  # fullwidth grave accent
    "\u2018 OR 1=1 --",
    "\u2019 OR \u20191\u2019=\u20191",
    "\uff07 OR \uff11=\uff11 --",
    "\u02bc OR 1=1 --",
    "\u202e' OR 1=1 --",  # right-to-left override
    "\u200b'\u200b OR 1=1 --",  # zero-width spaces
    "\ufeff' OR 1=1",  # byte order mark
    "e\u0301' OR 1=1 --",  # combining accent
    "\U0001f600' OR '\U0001f600'='\U0001f600",
    "\u0130",  # dotted capital I: changes length when lower-cased
    "\u00df",
    "\ufdfd",
    "\U0010fffd",
    "\u0661\u0662\u0663",  # Arabic-Indic digits, which Python's int() accepts
    "\u00b2",
)

FORMAT_STRINGS = (
    "{}",
    "{0}",
    "{conditions}",
    "{tenant}",
    "{{tenant}}",
    "{limit}",
    "{x!r}",
    "{0.__class__}",
    "{0.__class__.__mro__}",
    "{conditions} OR 1=1",
    "%s",
    "%d",
    "%(tenant)s",
    "%n",
    "%x%x%x",
    "${tenant}",
    "{{",
    "}}",
    "{",
    "}",
    "{:>99999}",
    "{tenant:String",
    "tenant:String}",
)

CONTROL = (
    "\x00",
    "x\x00",
    "\x00' OR 1=1 --",
    "beta-gateway\x00",
    "\n",
    "\r\n",
    "x\r\nX-Injected: 1",
    "\t",
    "\x1b[31m",
    "\x7f",
    "\x08",
    "\x0b\x0c",
    "' OR 1=1\n--",
)

ENCODED = (
    "%00",
    "%27",
    "%2527",
    "&#39;",
    "\\u0027",
    "\\x27",
    "%27%20OR%201=1",
    "'%20OR%20'1'='1",
)

JSON_BREAKING = ('"}', '{"a":', '\\"', "]", "[", "{}", "null", "true", '{"service":"beta-gateway"}')

OTHER_TENANTS = (
    "beta",
    "default",
    "beta-gateway",
    "beta-db",
    "beta-intruder",
    "default-svc",
    "beta-secret-prompt",
    BETA_TRACE,
    DEFAULT_TRACE,
    SHARED_TRACE.upper(),
    "bbbb000000000001",
    "prompt",
)

DURATIONS_AND_TIMES = (
    "-1s",
    "1.5.5s",
    "9999999999999999999999h",
    "NaN",
    "inf",
    "-inf",
    "1_000",
    " 1",
    "0x10",
    "9223372036854775808",
    "1e3ms",
    "2038-01-19T03:14:08Z'",
    "1970-01-01T00:00:00Z OR 1=1",
    "P1D",
)

BASE = CLASSIC + CLICKHOUSE + UNICODE + FORMAT_STRINGS + CONTROL + ENCODED + JSON_BREAKING + OTHER_TENANTS
BASE += DURATIONS_AND_TIMES

PREFIXED = tuple(prefix + p for p in CLASSIC + CLICKHOUSE[:20] for prefix in ("acme-gateway", "beta-gateway"))
"""Breakouts after a real service name: one's own (must not widen the match) and another tenant's."""

LONG = ("'" * 1024, "A" * 2000 + "' OR 1=1 --", "{" * 1024)
"""Long values (kept under what a URL of several such parameters can carry, ~64 KiB)."""

CORPUS: tuple[str, ...] = tuple(dict.fromkeys(BASE + PREFIXED + LONG))
"""Every payload, each once, in a stable order."""

SHARE = 1 if os.environ.get("HOTSPAN_SECURITY_CORPUS") == "all" else 4
"""Each payload goes through one in ``SHARE`` of the inputs (1: all of them)."""


def spread(inputs: Sequence[Input]) -> list[tuple[Input, str]]:
    """``(input, payload)`` pairs: payload ``i`` through the inputs ``j`` with ``(i + j) % SHARE == 0`` (of fewer than
    ``SHARE`` inputs, ``(i + j) % len(inputs) == 0``), so every payload meets at least one input and every input a
    ``1 / SHARE`` of the corpus, neighbouring payloads other inputs; all pairs with ``HOTSPAN_SECURITY_CORPUS=all``."""
    share = min(SHARE, len(inputs))
    return [(one, payload) for i, payload in enumerate(CORPUS) for j, one in enumerate(inputs) if (i + j) % share == 0]
