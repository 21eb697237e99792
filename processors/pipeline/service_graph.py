"""The service graph of whole traces: which node called which, over what kind of connection, how long
each side saw the call take, and whether it failed.

Pairing rules (Grafana Tempo's service graphs and the OTel Collector ``servicegraph`` connector, applied
to a complete trace so no pairing window or expiry is needed):

- **Paired call.** A ``Server`` (or ``Consumer``) span whose parent is a ``Client`` (or ``Producer``) span
  of *another* service: an edge client service → server service. Connection type ``messaging`` when either
  side is a producer/consumer span, else ``plain``. The client side's latency is the client span's duration,
  the server side's the server span's.
- **Client with no server.** A ``Client``/``Producer`` span with no ``Server``/``Consumer`` child calls a
  peer that sends no spans: a *virtual* node named by the first of :data:`PEER_ATTRIBUTES` the span has
  (spans with none are counted as unpaired). Connection type ``database`` when the span carries one of
  :data:`DATABASE_ATTRIBUTES`, ``messaging`` for a producer span or one with ``messaging.system``, else
  ``virtual``.
- **Server with no client.** A root ``Server`` span gets the client ``"user"`` (connection type ``virtual``);
  a root ``Consumer`` span gets its broker (``messaging.system`` or ``peer.service``) as client, or ``"user"``.
  A server span whose parent is missing from the trace is counted as unpaired, not guessed.
- A call is **failed** when either of its spans has status ``Error``.

Connection types are Hotspan's names; :data:`CONNECTOR_CONNECTION_TYPES` maps them to the label values the
OTel/Tempo connectors write (``""``, ``database``, ``messaging_system``, ``virtual_node``).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from analysis import TraceAnalysis
from analysis.spans import attribute, prepare_spans
from storage.service_graph_writer import EDGE_COLUMNS, ServiceGraphWriter
from storage.tenancy import DEFAULT_TENANT

USER = "user"
"""Client node of a root server span: whoever called the system from outside."""

CONNECTION_TYPES = ("plain", "database", "messaging", "virtual")
"""Hotspan's connection types, as stored and served by the API."""

CONNECTOR_CONNECTION_TYPES = {
    "plain": "",
    "database": "database",
    "messaging": "messaging_system",
    "virtual": "virtual_node",
}
"""Hotspan connection type → the ``connection_type`` label value of Tempo's / the OTel servicegraph connector's
metrics."""

PEER_ATTRIBUTES = (
    "peer.service",
    "db.namespace",
    "db.name",
    "db.system.name",
    "db.system",
    "messaging.system",
    "server.address",
    "net.peer.name",
)
"""Attributes naming the peer of a client span with no server span, most specific first (the connector's
``virtual_node_peer_attributes`` default is ``peer.service, db.name, db.system``; the current semconv names
and ``server.address`` follow)."""

DATABASE_ATTRIBUTES = (
    "db.system.name",
    "db.system",
    "db.namespace",
    "db.name",
    "db.query.text",
    "db.statement",
    "sql.query",
)
"""Attributes that make a client span's connection a ``database`` one: current and older semconv names, and
``sql.query``, the tag Brave/Zipkin JDBC instrumentation writes."""

BROKER_ATTRIBUTES = ("messaging.system", "peer.service")
"""Attributes naming the broker a root consumer span received from."""

_CALLERS = ("Client", "Producer")
_CALLEES = ("Server", "Consumer")


@dataclass(frozen=True)
class ServiceGraph:
    """The calls of a set of traces.

    Attributes:
        edges: one row per call, columns :data:`storage.service_graph_writer.EDGE_COLUMNS` (times and
            durations Int64 ns; a side without a span has ``has_*_span`` False and duration 0).
        unpaired_client_spans: client/producer spans with neither a server child nor a peer attribute,
            as ``(service, count)`` pairs.
        unpaired_server_spans: non-root server/consumer spans whose parent is not a client span in the trace
            (it is missing, or an uninstrumented hop), as ``(service, count)`` pairs.
    """

    edges: pl.DataFrame
    unpaired_client_spans: list[tuple[str, int]]
    unpaired_server_spans: list[tuple[str, int]]


def service_graph(spans: pl.DataFrame) -> ServiceGraph:
    """The calls in ``spans`` (whole traces, any number of them; the :mod:`analysis.spans` frame contract
    plus ``status_code`` and, optionally, ``tenant``) by the module's pairing rules. Spans pair only within one
    tenant and trace. Pure; no I/O.

    Raises:
        ValueError: the frame lacks a required column (see :func:`analysis.spans.prepare_spans`).
    """
    frame = _calls_view(spans)
    callers = frame.filter(pl.col("kind").is_in(_CALLERS))
    callees = frame.filter(pl.col("kind").is_in(_CALLEES))
    parents = frame.select(
        "tenant",
        "trace_id",
        pl.col("span_id").alias("parent_span_id"),
        pl.col("service").alias("p_service"),
        pl.col("kind").alias("p_kind"),
        pl.col("name").alias("p_name"),
        pl.col("start_ns").alias("p_start_ns"),
        pl.col("duration_ns").alias("p_duration_ns"),
        pl.col("failed").alias("p_failed"),
    )
    with_parent = callees.join(parents, on=["tenant", "trace_id", "parent_span_id"], how="left")
    under_caller = with_parent.filter(pl.col("p_kind").is_in(_CALLERS))
    paired = under_caller.filter(pl.col("p_service") != pl.col("service"))
    served = under_caller.select("tenant", "trace_id", pl.col("parent_span_id").alias("span_id")).unique()

    paired_edges = paired.select(
        "tenant",
        "trace_id",
        pl.col("p_start_ns").alias("timestamp_ns"),
        pl.col("p_service").alias("client"),
        pl.col("service").alias("server"),
        pl.when(pl.col("p_kind").eq("Producer") | pl.col("kind").eq("Consumer"))
        .then(pl.lit("messaging"))
        .otherwise(pl.lit("plain"))
        .alias("connection_type"),
        *_side("client", pl.col("parent_span_id"), pl.col("p_name"), pl.col("p_duration_ns")),
        *_own_side("server"),
        (pl.col("p_failed") | pl.col("failed")).alias("failed"),
    )

    lonely_callers = callers.join(served, on=["tenant", "trace_id", "span_id"], how="anti")
    virtual_servers = lonely_callers.filter(pl.col("peer").is_not_null())
    virtual_edges = virtual_servers.select(
        "tenant",
        "trace_id",
        pl.col("start_ns").alias("timestamp_ns"),
        pl.col("service").alias("client"),
        pl.col("peer").alias("server"),
        pl.when(pl.col("is_database"))
        .then(pl.lit("database"))
        .when(pl.col("kind").eq("Producer") | pl.col("messaging_system").is_not_null())
        .then(pl.lit("messaging"))
        .otherwise(pl.lit("virtual"))
        .alias("connection_type"),
        *_own_side("client"),
        *_no_side("server"),
        pl.col("failed"),
    )

    roots = callees.filter(pl.col("parent_span_id") == "")
    root_edges = roots.select(
        "tenant",
        "trace_id",
        pl.col("start_ns").alias("timestamp_ns"),
        pl.when(pl.col("kind").eq("Consumer") & pl.col("broker").is_not_null())
        .then(pl.col("broker"))
        .otherwise(pl.lit(USER))
        .alias("client"),
        pl.col("service").alias("server"),
        pl.when(pl.col("kind").eq("Consumer") & pl.col("broker").is_not_null())
        .then(pl.lit("messaging"))
        .otherwise(pl.lit("virtual"))
        .alias("connection_type"),
        *_no_side("client"),
        *_own_side("server"),
        pl.col("failed"),
    )

    edges = pl.concat([paired_edges, virtual_edges, root_edges], how="vertical").select(EDGE_COLUMNS)
    orphans = with_parent.filter((pl.col("parent_span_id") != "") & ~pl.col("p_kind").is_in(_CALLERS).fill_null(False))
    return ServiceGraph(
        edges=edges.sort("tenant", "trace_id", "timestamp_ns", "client_span_id", "server_span_id"),
        unpaired_client_spans=_count_by_service(lonely_callers.filter(pl.col("peer").is_null())),
        unpaired_server_spans=_count_by_service(orphans),
    )


def _side(role: str, span_id: pl.Expr, name: pl.Expr, duration_ns: pl.Expr) -> list[pl.Expr]:
    """The four edge columns of one side of a call (``role``: ``client`` or ``server``) that a span recorded:
    ``<role>_span_id``, ``<role>_span_name``, ``has_<role>_span`` (true), ``<role>_duration_ns``."""
    return [
        span_id.alias(f"{role}_span_id"),
        name.alias(f"{role}_span_name"),
        pl.lit(True).alias(f"has_{role}_span"),
        duration_ns.alias(f"{role}_duration_ns"),
    ]


def _own_side(role: str) -> list[pl.Expr]:
    """:func:`_side` for the row's own span."""
    return _side(role, pl.col("span_id"), pl.col("name"), pl.col("duration_ns"))


def _no_side(role: str) -> list[pl.Expr]:
    """:func:`_side`'s columns for a side no span recorded (a virtual node): empty ID and name, 0 ns."""
    return [
        pl.lit("").alias(f"{role}_span_id"),
        pl.lit("").alias(f"{role}_span_name"),
        pl.lit(False).alias(f"has_{role}_span"),
        pl.lit(0, dtype=pl.Int64).alias(f"{role}_duration_ns"),
    ]


class ServiceGraphMetricsSink(Protocol):
    """What :class:`ServiceGraphProcessor` reports to (implemented by
    :class:`processors.pipeline.trace_metrics.TraceMetrics`)."""

    def observe_service_graph(self, graph: ServiceGraph, sampled_out: frozenset[str] = frozenset()) -> None:
        """Count the calls and unpaired spans of ``graph``; no exemplar names a trace of ``sampled_out``."""
        ...


def _calls_view(spans: pl.DataFrame) -> pl.DataFrame:
    """The columns pairing needs, one row per distinct span (an exporter that retried may have stored a span
    twice): tenant (from an optional ``tenant`` column, ``''``/missing folded to the default tenant), kind folded
    to ``Server``..., duration in ns, failed flag, peer, broker and database markers."""
    prepared = prepare_spans(spans)
    status = pl.col("status_code") if "status_code" in prepared.columns else pl.lit("Unset")
    tenant = pl.col("tenant") if "tenant" in prepared.columns else pl.lit(None, dtype=pl.String)
    return prepared.unique(subset=["trace_id", "span_id"], keep="first", maintain_order=True).select(
        pl.when(tenant.fill_null("") == "").then(pl.lit(DEFAULT_TENANT)).otherwise(tenant).alias("tenant"),
        "trace_id",
        "span_id",
        "parent_span_id",
        pl.col("service_name").alias("service"),
        "kind",
        "name",
        pl.col("start_time_unix_nano").alias("start_ns"),
        (pl.col("end_time_unix_nano") - pl.col("start_time_unix_nano")).alias("duration_ns"),
        status.str.replace(r"^STATUS_CODE_", "").str.to_titlecase().eq("Error").fill_null(False).alias("failed"),
        _first_present(PEER_ATTRIBUTES).alias("peer"),
        _first_present(BROKER_ATTRIBUTES).alias("broker"),
        attribute("messaging.system").alias("messaging_system"),
        pl.any_horizontal(*(attribute(key).is_not_null() for key in DATABASE_ATTRIBUTES)).alias("is_database"),
    )


def _first_present(keys: Iterable[str]) -> pl.Expr:
    """The first non-empty value among attributes ``keys`` (null when none is set)."""
    values = [pl.when(attribute(key) != "").then(attribute(key)) for key in keys]
    return pl.coalesce(values)


def _count_by_service(frame: pl.DataFrame) -> list[tuple[str, int]]:
    counts = frame.group_by("service").len().sort("service")
    return [(row[0], int(row[1])) for row in counts.iter_rows()]


class ServiceGraphProcessor:
    """:class:`~processors.pipeline.base.TraceProcessor`: the calls of each quiet trace analysed for the first
    time go to ``hotspan_service_graph_edges`` (and from there into the per-minute rollup) and, when given, to
    the servicegraph metrics on ``/metrics``.

    Each trace is counted once: only traces in ``first_seen`` are paired, so a trace analysed again after late
    spans arrived adds nothing (its late calls are not counted; the connectors drop such spans too). A batch
    the pipeline offers again after a later step failed is written with the same deduplication token (a
    no-op in ClickHouse) and not counted again in the metrics.

    Args:
        writer: where edge rows go (durable on return).
        metrics: the process's servicegraph metric families, or None for none.

    Blocking: one ClickHouse insert per batch; called on the pipeline's worker thread.
    """

    def __init__(self, writer: ServiceGraphWriter, metrics: ServiceGraphMetricsSink | None = None) -> None:
        self._writer = writer
        self._metrics = metrics
        self._counted = RecentKeys()

    def process(
        self,
        spans: pl.DataFrame,
        analysis: TraceAnalysis,
        first_seen: set[str],
        sampled_out: frozenset[str] = frozenset(),
    ) -> None:
        """Pair the calls of the ``first_seen`` traces among ``spans`` and store them; the edges of ``sampled_out``
        traces are stored and counted too (what the graph shows covers all traffic), never offered as exemplars.

        Raises:
            Exception: whatever the writer raises; the metrics are then left as they were.
        """
        del analysis  # pairing needs the raw spans only: their kinds, parents and attributes
        if not first_seen:
            return
        fresh = spans.filter(pl.col("trace_id").is_in(sorted(first_seen)))
        if fresh.height == 0:
            return
        graph = service_graph(fresh)
        key = batch_key(fresh, first_seen)
        self._writer.write(graph.edges, dedup_token=f"service-graph-{key}")
        if self._metrics is not None and self._counted.add(key):
            self._metrics.observe_service_graph(graph, sampled_out)


def batch_key(spans: pl.DataFrame, trace_ids: set[str]) -> str:
    """A digest naming a batch: its tenant (``tenant`` column, when present) and trace IDs. The pipeline offers a
    failed batch again unchanged, so the key repeats exactly then."""
    tenant = spans["tenant"][0] if "tenant" in spans.columns and spans.height else ""
    digest = hashlib.sha256(str(tenant).encode())
    for trace_id in sorted(trace_ids):
        digest.update(b"\0" + trace_id.encode())
    return digest.hexdigest()[:32]


class RecentKeys:
    """The last ``size`` batch keys seen, so a retried batch is not counted twice in-process."""

    def __init__(self, size: int = 1024) -> None:
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def add(self, key: str) -> bool:
        """Remember ``key``; True when it was not among the recent keys."""
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = None
            if len(self._keys) > self._size:
                self._keys.popitem(last=False)
            return True
