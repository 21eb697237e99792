"""Where Hotspan's tables live: one ClickHouse node, or a cluster of shards and replicas.

**One node** (:data:`SINGLE_NODE`, no cluster named): the migrations in ``storage/sql/`` run as written.

**A cluster** (``HOTSPAN_CLICKHOUSE_CLUSTER``, a cluster of the servers' ``remote_servers``): every migration is
rendered for it from the same file (:func:`render_statement`), so the two layouts cannot drift apart:

- a table ``T`` becomes ``T_local`` on every node (``ON CLUSTER``), with the ``Replicated`` variant of its engine
  (Keeper path ``/clickhouse/tables/{shard}/{database}/{table}``, replica ``{replica}``: the servers' macros), and
  ``T`` becomes a ``Distributed`` table over ``T_local`` on every node. Tables holding a ``TraceId`` are sharded by
  ``cityHash64(TraceId)``, so every span of a trace, its arrivals, its analysis, its summary and its service-graph
  calls live on one shard; the per-minute rollups hold no trace and are sharded at random (readers merge them);
- a materialized view reads and fills local tables, so it runs on the shard that received the insert;
- ``ALTER TABLE T ADD COLUMN`` alters ``T_local`` and ``T``; ``MODIFY SETTING``, ``ADD PROJECTION`` and
  ``MATERIALIZE PROJECTION`` the local table (a projection is part of each shard's parts); ``MODIFY QUERY`` the
  view, reading its local source;
- inserts (the backfills) run as written, through the ``Distributed`` tables.

Readers and writers name tables as on one node (``otel_traces`` ...): on a cluster these are the ``Distributed``
tables, and every query is written to be correct through them (``storage.trace_sql`` says how). The session
settings of :attr:`Layout.session_settings` make inserts synchronous and let trace-ID lookups reach one shard only.

Why ``T`` for the ``Distributed`` table and ``T_local`` for the shard's table (SigNoz names them the other way):
Grafana's ClickHouse plugin and every query Hotspan or its users wrote read ``otel_traces``, and keep working.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from storage.identifiers import validate_identifier

LOCAL_SUFFIX = "_local"
"""Suffix of a shard's own table under its ``Distributed`` table."""

TRACE_SHARDING_KEY = "cityHash64(TraceId)"
"""Sharding key of every table holding a trace ID: one trace, one shard (the pipeline's work split uses the same
hash, ``processors.pipeline``)."""

ROLLUP_SHARDING_KEY = "rand()"
"""Sharding key of the tables holding no trace (per-minute rollups, filled by views on each shard anyway)."""

KEEPER_PATH = "/clickhouse/tables/{shard}/{database}/{table}"
"""Keeper path of a replicated shard table: one per shard and table; ``{shard}`` is each server's macro,
``{database}``/``{table}`` ClickHouse's own."""

LEDGER_KEEPER_PATH = "/clickhouse/tables/{database}/{table}"
"""Keeper path of the migrations ledger: one for the whole cluster, so every node holds the same ledger."""


@dataclass(frozen=True)
class Layout:
    """The table layout Hotspan creates and reads.

    Attributes:
        cluster: the ClickHouse cluster's name (``remote_servers``); None for one node.
        replicated: on a cluster, DDL runs ``ON CLUSTER`` and tables are ``Replicated*`` (both need ClickHouse
            Keeper). False for shards of one replica each without Keeper: the DDL then changes only the node it
            is sent to, so each node is migrated on its own (the embedded test harness, ``tests/cluster_kit.py``).
    """

    cluster: str | None = None
    replicated: bool = True

    def __post_init__(self) -> None:
        if self.cluster is not None:
            validate_identifier(self.cluster)

    @property
    def clustered(self) -> bool:
        """Whether the tables are sharded (a cluster is named)."""
        return self.cluster is not None

    @property
    def session_settings(self) -> dict[str, str]:
        """ClickHouse settings of every session on this layout (none on one node).

        On a cluster: inserts into a ``Distributed`` table return once the shards stored the rows
        (``distributed_foreground_insert``; the default queues them on the node and sends them later, which would
        break the writers' "durable on return" and a read right after a write), and a query bounded to some trace
        IDs reads only their shards (``optimize_skip_unused_shards``).
        """
        if not self.clustered:
            return {}
        return {
            "distributed_foreground_insert": "1",
            "optimize_skip_unused_shards": "1",
            "distributed_product_mode": "local",
        }

    def table(self, name: str) -> str:
        """The table that holds ``name``'s rows on a node: ``name`` on one node, ``name_local`` on a cluster."""
        return f"{name}{LOCAL_SUFFIX}" if self.clustered else name

    def on_every_shard(self, sql: str, database: str, tables: Iterable[str], whole: Iterable[str] = ()) -> str:
        """A table expression of the rows ``sql`` (a ``SELECT`` reading ``tables`` and ``whole`` by their names on
        one node) answers on each shard, run whole there: ``(sql)`` on one node; on a cluster ``cluster(...)`` over
        ``view(sql)`` with each ``FROM <table>`` of ``tables`` reading ``database``'s ``<table>_local`` (one replica
        per shard), and each ``FROM <table>`` of ``whole`` reading ``database``'s ``<table>`` (the ``Distributed``
        table: every shard's rows). For a query whose every row comes from one trace's rows (a join within a
        trace): each shard joins and aggregates its own traces, and the caller merges the shards' partial results
        (a ``sum`` of counts), where through the ``Distributed`` tables every side of the join would travel to the
        initiator and be joined there. A scalar subquery is answered once and its value sent to every shard, so
        one that bounds what each shard reads must read ``whole`` tables: over a ``_local`` table it would hold
        one shard's rows only.

        Raises:
            ValueError: ``database`` is not a plain identifier.
        """
        if not self.clustered:
            return f"({sql})"
        database = validate_identifier(database)
        names = {name: self.table(name) for name in tables} | {name: name for name in whole}
        qualified = re.sub(
            rf"\bFROM ({'|'.join(map(re.escape, names))})\b",
            lambda found: f"FROM {database}.{names[found[1]]}",
            sql,
        )
        return f"cluster('{self.cluster}', view({qualified}))"


SINGLE_NODE = Layout()
"""Everything on one node, as the migration files are written."""

_COMMENT = re.compile(r"^\s*--.*$", re.M)
_CREATE_TABLE = re.compile(
    r"^CREATE TABLE IF NOT EXISTS (?P<name>\w+) \((?P<body>.*)\) ENGINE = (?P<engine>\w+)(?:\((?P<args>[^)]*)\))?"
    r"(?P<rest>.*)$",
    re.S,
)
_CREATE_VIEW = re.compile(
    r"^CREATE MATERIALIZED VIEW IF NOT EXISTS (?P<name>\w+)\s+TO (?P<target>\w+)\s+(?P<select>AS SELECT.*)$", re.S
)
_ALTER = re.compile(
    r"^ALTER TABLE (?P<name>\w+)\s+"
    r"(?P<action>ADD COLUMN|MODIFY SETTING|ADD PROJECTION|MATERIALIZE PROJECTION|MODIFY QUERY)(?P<rest>.*)$",
    re.S,
)
_INSERT = re.compile(r"^INSERT INTO \w+\s", re.S)
_DELETE = re.compile(r"^\s*DELETE FROM (?P<name>\w+)(?P<rest>\s.*)$", re.S)
_UPDATE = re.compile(r"^\s*ALTER TABLE (?P<name>\w+)\s+UPDATE(?P<rest>\s.*)$", re.S)
_TRACE_COLUMN = re.compile(r"^\s*TraceId\s", re.M)
_FROM = re.compile(r"\bFROM (\w+)\b")
_REPLICABLE = {"MergeTree", "ReplacingMergeTree", "AggregatingMergeTree"}


class UnrenderableMigration(ValueError):
    """A migration statement of a form :func:`render_statement` does not know how to place on a cluster."""


def render_statement(sql: str, layout: Layout, database: str) -> list[str]:
    """The statements that apply one migration statement ``sql`` (TTL placeholders already filled) on ``layout``
    in ``database``: ``[sql]`` itself on one node; on a cluster, the statements of the module docstring.

    Raises:
        UnrenderableMigration: ``sql`` is not a ``CREATE TABLE``, ``CREATE MATERIALIZED VIEW ... TO``, ``ALTER TABLE
            ... ADD COLUMN | MODIFY SETTING | ADD PROJECTION | MATERIALIZE PROJECTION | MODIFY QUERY`` or ``INSERT
            INTO`` statement of the shapes the migrations use: a new migration of another shape needs a rule here
            first.
    """
    if not layout.clustered:
        return [sql]
    statement = _COMMENT.sub("", sql).strip()
    if created := _CREATE_TABLE.match(statement):
        return _create_table(created, layout, validate_identifier(database))
    if view := _CREATE_VIEW.match(statement):
        return [
            f"CREATE MATERIALIZED VIEW IF NOT EXISTS {view['name']}{_on_cluster(layout)}\n"
            f"TO {layout.table(view['target'])}\n{_local_sources(view['select'], layout)}"
        ]
    if altered := _ALTER.match(statement):
        return _alter(altered, layout)
    if _INSERT.match(statement):
        return [statement]
    raise UnrenderableMigration(f"no cluster rule for the statement starting {statement[:80]!r}")


def mutation_statement(sql: str, layout: Layout) -> str:
    """A lightweight ``DELETE FROM T WHERE ...`` or a mutation ``ALTER TABLE T UPDATE ...`` (``sql``) for
    ``layout``: as written on one node; on a cluster against each shard's ``T_local`` (``ON CLUSTER`` when
    replicated), because ClickHouse deletes and mutates rows of MergeTree tables only, not through a
    ``Distributed`` one. Subqueries in the condition keep reading the ``Distributed`` tables they name.

    Raises:
        UnrenderableMigration: ``sql`` is neither statement.
    """
    if (deleted := _DELETE.match(sql)) is not None:
        head = "DELETE FROM {table}{on_cluster}"
    elif (deleted := _UPDATE.match(sql)) is not None:
        head = "ALTER TABLE {table}{on_cluster} UPDATE"
    else:
        raise UnrenderableMigration(f"not a DELETE or ALTER TABLE ... UPDATE statement: {sql[:80]!r}")
    if not layout.clustered:
        return sql
    return head.format(table=layout.table(deleted["name"]), on_cluster=_on_cluster(layout)) + deleted["rest"]


def ledger_statement(sql: str, layout: Layout) -> str:
    """The migrations ledger's ``CREATE TABLE`` (``sql``, a plain ``ReplacingMergeTree``) for ``layout``: as written
    on one node; on a replicated cluster one table on every node, all replicas of one Keeper path, so every node
    reads the same ledger (no ``Distributed`` table: each node holds all of it)."""
    if not (layout.clustered and layout.replicated):
        return sql
    created = _CREATE_TABLE.match(_COMMENT.sub("", sql).strip())
    if created is None or created["engine"] != "ReplacingMergeTree":
        raise UnrenderableMigration("the ledger must be a ReplacingMergeTree table")
    engine = f"ReplicatedReplacingMergeTree('{LEDGER_KEEPER_PATH}', '{{replica}}')"
    return (
        f"CREATE TABLE IF NOT EXISTS {created['name']}{_on_cluster(layout)} ({created['body']}) ENGINE = {engine}"
        f"{created['rest']}"
    )


def _on_cluster(layout: Layout) -> str:
    return f" ON CLUSTER {layout.cluster}" if layout.replicated else ""


def _create_table(created: re.Match[str], layout: Layout, database: str) -> list[str]:
    name, engine, args = created["name"], created["engine"], created["args"]
    local = layout.table(name)
    if layout.replicated:
        if engine not in _REPLICABLE:
            raise UnrenderableMigration(f"no replicated variant known for engine {engine} of {name}")
        replication = f"'{KEEPER_PATH}', '{{replica}}'"
        engine_clause = f"Replicated{engine}({replication}{', ' + args if args else ''})"
    else:
        engine_clause = engine if args is None else f"{engine}({args})"
    key = TRACE_SHARDING_KEY if _TRACE_COLUMN.search(created["body"]) else ROLLUP_SHARDING_KEY
    on_cluster = _on_cluster(layout)
    return [
        f"CREATE TABLE IF NOT EXISTS {local}{on_cluster} ({created['body']}) ENGINE = {engine_clause}{created['rest']}",
        f"CREATE TABLE IF NOT EXISTS {name}{on_cluster} AS {local}\n"
        f"ENGINE = Distributed('{layout.cluster}', '{database}', '{local}', {key})",
    ]


def _alter(altered: re.Match[str], layout: Layout) -> list[str]:
    name, action, rest = altered["name"], altered["action"], altered["rest"]
    on_cluster = _on_cluster(layout)
    if action == "ADD COLUMN":
        return [f"ALTER TABLE {table}{on_cluster} {action}{rest}" for table in (layout.table(name), name)]
    if action in ("MODIFY SETTING", "ADD PROJECTION", "MATERIALIZE PROJECTION"):
        return [f"ALTER TABLE {layout.table(name)}{on_cluster} {action}{rest}"]
    return [f"ALTER TABLE {name}{on_cluster} {action}{_local_sources(rest, layout)}"]


def _local_sources(select: str, layout: Layout) -> str:
    """A view's query reading local tables instead of the ``Distributed`` ones it names."""
    return _FROM.sub(lambda found: f"FROM {layout.table(found[1])}", select)
