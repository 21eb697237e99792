"""The service graph a window's readers show: nodes and edges from the per-minute service-graph rollup that the
trace pipeline writes (``processors.pipeline.service_graph``), and the traces behind an edge; its connected parts and
a node's neighbours (what groups an incident's series and names its neighbours, :mod:`incidents.lifecycle`).

Every read is for one tenant (``storage.tenancy``); times are ns since the Unix epoch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from processors.pipeline.service_graph import USER
from storage.rollup_reader import EdgeScope, RollupReader

NODE_KINDS = ("service", "user", "database", "messaging", "virtual")
"""Kinds of service-graph nodes: a service that sent spans, the outside caller, or a peer that sent none,
typed by the connections that reach it."""


@dataclass(frozen=True)
class Topology:
    """A window's service graph: ``nodes`` (:func:`topology_nodes`), ``edges``
    (:meth:`storage.rollup_reader.RollupReader.service_graph` columns) and ``overflow``: the same columns, one row
    folding the edges beyond the read's limit (its names empty), or none."""

    nodes: pl.DataFrame
    edges: pl.DataFrame
    overflow: pl.DataFrame


def window_topology(
    rollups: RollupReader,
    start_ns: int,
    end_ns: int,
    *,
    tenant: str | None,
    scope: EdgeScope | None = None,
    limit: int | None = None,
) -> Topology:
    """The service graph over ``[start_ns, end_ns]`` as the rollups hold it (whole minutes). With a ``scope``
    (:class:`~storage.rollup_reader.EdgeScope`), its calls only, and of the services that sent spans only those
    on them (and the scope's service). With a ``limit``, the ``limit`` edges with the most calls (the rest in
    ``overflow``) and at most ``limit`` nodes that sent spans without an edge shown. Blocking."""
    read = rollups.service_graph(start_ns, end_ns, tenant=tenant, scope=scope, limit=limit)
    edges, overflow = read.filter(~pl.col("overflow")), read.filter(pl.col("overflow"))
    services = rollups.rollup_services(start_ns, end_ns, tenant=tenant)
    shown = {*edges["client"], *edges["server"]}
    if scope is not None and scope.parameters():
        shown.add(scope.parameters().get("service"))
        services = [service for service in services if service in shown]
    elif limit is not None:
        alone = [service for service in services if service not in shown][:limit]
        services = [service for service in services if service in shown] + alone
    return Topology(topology_nodes(edges, services), edges, overflow)


def topology_nodes(edges: pl.DataFrame, services: Iterable[str]) -> pl.DataFrame:
    """The nodes of a graph read back from the rollups. Pure.

    Args:
        edges: ``client``, ``server``, ``connection_type``, ``calls``, ``errors`` per edge (what
            :meth:`storage.rollup_reader.RollupReader.service_graph` returns).
        services: names of the services that sent spans in the same window: those nodes are ``service``
            whatever their edges say; services without edges are included too.

    Returns:
        ``id`` (String), ``kind`` (one of :data:`NODE_KINDS`), ``calls_in``, ``calls_out``, ``errors_in``
        (Int64: calls and failed calls received, calls made), ``calls`` (``calls_in``, or ``calls_out`` for a
        node that only calls, like ``user``); sorted by id.
    """
    known = sorted(set(services))
    incoming = edges.group_by(pl.col("server").alias("id")).agg(
        pl.col("calls").sum().cast(pl.Int64).alias("calls_in"),
        pl.col("errors").sum().cast(pl.Int64).alias("errors_in"),
        pl.col("connection_type").alias("in_types"),
    )
    outgoing = edges.group_by(pl.col("client").alias("id")).agg(
        pl.col("calls").sum().cast(pl.Int64).alias("calls_out"),
        pl.col("connection_type").alias("out_types"),
    )
    ids = pl.concat(
        [incoming.select("id"), outgoing.select("id"), pl.DataFrame({"id": known}, schema={"id": pl.String})]
    ).unique()
    nodes = ids.join(incoming, on="id", how="left").join(outgoing, on="id", how="left")
    types = pl.concat_list(pl.col("in_types").fill_null([]), pl.col("out_types").fill_null([]))
    kind = (
        pl.when(pl.col("id").is_in(known))
        .then(pl.lit("service"))
        .when(pl.col("id") == USER)
        .then(pl.lit("user"))
        .when(types.list.contains("database"))
        .then(pl.lit("database"))
        .when(types.list.contains("messaging"))
        .then(pl.lit("messaging"))
        .otherwise(pl.lit("virtual"))
    )
    return (
        nodes.with_columns(
            kind.alias("kind"),
            pl.col("calls_in").fill_null(0),
            pl.col("calls_out").fill_null(0),
            pl.col("errors_in").fill_null(0),
        )
        .with_columns(
            pl.when(pl.col("calls_in") > 0).then(pl.col("calls_in")).otherwise(pl.col("calls_out")).alias("calls")
        )
        .select("id", "kind", "calls", "calls_in", "calls_out", "errors_in")
        .sort("id")
    )


def connected_parts(edges: pl.DataFrame) -> dict[str, str]:
    """Each node of the service graph ``edges`` (a :class:`Topology`'s) → the smallest name of its connected part
    (the outside caller ``user`` left out, or every service would be one part through it). Pure."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for client, server in edges.select("client", "server").iter_rows():
        if USER in (client, server):
            continue
        a, b = root(client), root(server)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {node: root(node) for node in list(parent)}


def neighbours(edges: pl.DataFrame, service: str) -> list[str]:
    """Nodes with an edge to or from ``service`` in the service graph ``edges`` (a :class:`Topology`'s), sorted.
    Pure."""
    found: Iterable[str] = (
        server if client == service else client
        for client, server in edges.select("client", "server").iter_rows()
        if service in (client, server)
    )
    return sorted(set(found) - {service})
