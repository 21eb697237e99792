"""A two-shard ClickHouse cluster inside the embedded engine, for tests and benchmarks of the cluster layout.

ClickHouse runs a query through a ``Distributed`` table over a cluster whose shards are all this process: the
replicas ``localhost:9000`` and ``127.0.0.1:9000`` both name the embedded engine itself (nothing listens on 9000;
ClickHouse recognises its own address and port and runs each shard's part in process). Both shards then read the
same local tables, so the engine's ``default`` user gets a row filter on each local table that shows shard ``n``
the rows a real cluster would have stored on it: ``cityHash64(TraceId) % 2 + 1 = shardNum()`` for the tables
sharded by trace, a split by minute for the rollups (``shardNum() = 0``, a query that is not part of a distributed
one, sees everything). Through it ``count()``, quantile states, ``uniqExact``, ``FINAL`` and ``GLOBAL IN``/``JOIN``
behave as on a real cluster, and a plain ``IN`` over a ``Distributed`` subquery fails as it does there. One
setting differs from ClickHouse's default: ``parallel_distributed_insert_select = 0``. With its default (2) an
``INSERT INTO dist SELECT ... FROM dist`` (the migrations' backfills) runs as a local insert-select on each shard,
which is right on a cluster but reads the whole shared local table twice here (a local query sees every row).

What it cannot run: ``ON CLUSTER`` (the embedded engine has no distributed DDL queue) and ``Replicated*`` tables
(no Keeper). Its stores use :class:`storage.layout.Layout` with ``replicated=False``; the replicated rendering is
checked with ClickHouse's own parser instead (``tests/storage/test_cluster_layout.py``).

The engine reads its row filters once, when it opens, and only for databases named there, so cluster stores come
from a fixed pool of database names (:func:`cluster_database`). The engine must be opened by :func:`open_engine`
before any other client of the process touches it (``tests/conftest.py``'s ``chdb_dsn`` does).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from hotspan.server import RunningServer, start_server
from hotspan.settings import load_settings
from storage.clickhouse import ClickHouse
from storage.layout import ROLLUP_SHARDING_KEY, SINGLE_NODE, Layout
from storage.migrations import apply_migrations, migration_files, render

CLUSTER = "hotspan_test"
"""The harness's cluster name."""

LAYOUT = Layout(CLUSTER, replicated=False)
"""The layout of a harness store: sharded, not replicated."""

POOL_SIZE = 48
"""Cluster databases the engine knows row filters for; a test process holds at most this many at once."""

ANALYSIS_DEADLINE_S = 60.0
"""Longest wait for a served pipeline to analyse the traces it was sent (:func:`wait_analysed`)."""
_DISTRIBUTED = re.compile(r"ENGINE = Distributed\('\w+', '\w+', '(\w+)', (.+)\)")
_engine: Any = None
_free: list[str] = []
_lock = threading.Lock()


def local_tables() -> dict[str, str]:
    """Every local table of the cluster layout and its sharding key, from the rendered migrations."""
    from storage.layout import render_statement

    tables = {}
    for _, _, sql in migration_files():
        for statement in render_statement(render(sql, 0), LAYOUT, "db"):
            if found := _DISTRIBUTED.search(statement):
                tables[found[1]] = found[2]
    return tables


def _shard_filter(key: str) -> str:
    split = "cityHash64(Timestamp)" if key == ROLLUP_SHARDING_KEY else key
    return f"shardNum() = 0 OR {split} % 2 + 1 = shardNum()"


def _users_xml(databases: list[str]) -> str:
    filters = "".join(
        f"<{table}><filter>{_shard_filter(key)}</filter></{table}>" for table, key in local_tables().items()
    )
    databases_xml = "".join(f"<{database}>{filters}</{database}>" for database in databases)
    return f"""<clickhouse>
  <users><default>
    <password></password><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota>
    <databases>{databases_xml}</databases>
  </default></users>
  <profiles><default><parallel_distributed_insert_select>0</parallel_distributed_insert_select></default></profiles>
  <quotas><default/></quotas>
</clickhouse>"""


def _config_xml(users: Path) -> str:
    replicas = "".join(
        f"<shard><replica><host>{host}</host><port>9000</port></replica></shard>" for host in ("localhost", "127.0.0.1")
    )
    return f"""<clickhouse>
  <tcp_port>9000</tcp_port>
  <users_config>{users}</users_config>
  <remote_servers><{CLUSTER}>{replicas}</{CLUSTER}></remote_servers>
</clickhouse>"""


def open_engine(directory: Path, pool: str | None = None) -> str:
    """Open this process's embedded engine in ``directory`` with the harness's cluster and row filters, keep it
    open for the process's life, and return its ``chdb://`` DSN (every client of the process then shares it).
    ``pool`` names the cluster databases (``hc_<pool>_<i>``, :func:`pool_database` handing out the highest ``i``
    first), so a store kept in ``directory`` is found again by a later process; None: fresh random names.

    Raises:
        RuntimeError: the engine is open already (chDB runs one engine per process).
    """
    import chdb

    global _engine
    with _lock:
        if _engine is not None:
            raise RuntimeError("the embedded engine is open already")
        names = [f"hc_{pool or uuid.uuid4().hex[:8]}_{i}" for i in range(POOL_SIZE)]
        users = directory / "users.xml"
        users.write_text(_users_xml(names), encoding="utf-8")
        config = directory / "cluster.xml"
        config.write_text(_config_xml(users), encoding="utf-8")
        data = directory / "data"
        _engine = chdb.connect(f"{data}?config-file={config}")
        _free.extend(names)
    return f"chdb://{data}"


LAYOUTS = ("one_node", "cluster")
"""The layouts a test runs against, by name (``pytest`` parameter ids)."""


@contextmanager
def pool_database() -> Iterator[str]:
    """The name of a free cluster database of the pool (the engine knows its row filters), held until exit and
    dropped then by whoever created it.

    Raises:
        RuntimeError: :func:`open_engine` did not open the engine, or every pool database is in use.
    """
    with _lock:
        if not _free:
            raise RuntimeError("no cluster database left: open_engine first, or release some")
        name = _free.pop()
    try:
        yield name
    finally:
        with _lock:
            _free.append(name)


@contextmanager
def layout_database(dsn: str, layout: str) -> Iterator[ClickHouse]:
    """A migrated, empty store of ``layout`` (one of :data:`LAYOUTS`) on the engine at ``dsn``, dropped on exit:
    ``one_node`` a database of its own as every other test has, ``cluster`` local tables, ``Distributed`` tables
    over the two shards and views on the local tables in a database of the pool.

    Raises:
        RuntimeError: as :func:`pool_database`.
        ValueError: an unknown ``layout``.
    """
    with layout_settings(dsn, layout, "t") as where:
        ch = ClickHouse(dsn, where["clickhouse_database"], LAYOUT if layout == "cluster" else SINGLE_NODE)
        try:
            apply_migrations(ch)
            yield ch
        finally:
            ch.close()


@contextmanager
def layout_settings(dsn: str, layout: str, prefix: str) -> Iterator[dict[str, Any]]:
    """Settings (``hotspan.settings``) that put a served Hotspan's store in a database of ``layout`` (one of
    :data:`LAYOUTS`; named ``<prefix>_<random>`` on one node), which the server creates and migrates; dropped on
    exit, after the caller stopped the server.

    Raises:
        RuntimeError: as :func:`pool_database`.
        ValueError: an unknown ``layout``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}")
    with contextlib.ExitStack() as stack:
        if layout == "cluster":
            where = {
                "clickhouse_database": stack.enter_context(pool_database()),
                "clickhouse_cluster": CLUSTER,
                "clickhouse_replicated": False,
            }
        else:
            where = {"clickhouse_database": f"{prefix}_{uuid.uuid4().hex[:12]}"}
        try:
            yield where
        finally:
            cleanup = ClickHouse(dsn, str(where["clickhouse_database"]))
            cleanup.command(f"DROP DATABASE IF EXISTS {cleanup.database}")
            cleanup.close()


@contextmanager
def served_on(dsn: str, layout: str, data_dir: Path, prefix: str, **settings: Any) -> Iterator[RunningServer]:
    """A Hotspan served in this process (HTTP on a free port, no gRPC, traces analysed 0.2 s after their last
    span) on a store of ``layout`` (:func:`layout_settings`), ``settings`` (of ``load_settings``) added; stopped on
    exit."""
    with layout_settings(dsn, layout, prefix) as where:
        running = start_server(
            load_settings(
                data_dir=data_dir, clickhouse_dsn=dsn, http_port=0, grpc_port=-1, trace_idle_s=0.2, **where, **settings
            )
        )
        try:
            yield running
        finally:
            running.stop()


@contextmanager
def served_holding(
    dsn: str, layout: str, data_dir: Path, prefix: str, request: ExportTraceServiceRequest
) -> Iterator[RunningServer]:
    """:func:`served_on` holding ``request``, sent through its OTLP/HTTP endpoint.

    Raises:
        AssertionError: the export was not answered 200.
    """
    with served_on(dsn, layout, data_dir, prefix) as running:
        answer = httpx.post(
            f"{running.base_url}/v1/traces",
            content=request.SerializeToString(),
            headers={"content-type": "application/x-protobuf"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        yield running


def wait_analysed(server: RunningServer, request: ExportTraceServiceRequest) -> None:
    """Wait until the served pipeline has analysed every trace of ``request`` (each search result carries its model
    calls), at most :data:`ANALYSIS_DEADLINE_S` seconds."""
    traces = sum(not s.parent_span_id for r in request.resource_spans for c in r.scope_spans for s in c.spans)
    deadline = time.monotonic() + ANALYSIS_DEADLINE_S
    while time.monotonic() < deadline:
        found = httpx.get(f"{server.base_url}/api/v1/traces", params={"limit": 100}, timeout=30).json()["traces"]
        if len(found) == traces and all(t["llm_calls"] is not None for t in found):
            return
        time.sleep(0.2)
    raise AssertionError(f"the trace pipeline did not analyse {traces} traces in {ANALYSIS_DEADLINE_S} s")
