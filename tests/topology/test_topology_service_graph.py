"""Pairing calls into service-graph edges (processors.pipeline.service_graph): the rules on hand-built traces,
then the OpenTelemetry demo capture and the Zipkin database and messaging samples through the real pipeline."""

from __future__ import annotations

import polars as pl
import pytest
from topology_support import MS, demo_batch, frame, otlp_client_server_pairs, run_pipeline, span, storage_of

from hotspan.importer import StoreSink, import_paths
from processors.pipeline.service_graph import ServiceGraphProcessor, service_graph
from query.topology import topology_nodes, window_topology
from storage.clickhouse import ClickHouse
from storage.rollup_reader import EdgeScope
from testkit import TRACES

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
ZIPKIN = TRACES / "zipkin"
FAR_FUTURE = 4_000_000_000_000_000_000


def edges_of(spans: pl.DataFrame) -> list[tuple]:
    edges = service_graph(spans).edges
    return sorted(
        edges.select("client", "server", "connection_type", "client_duration_ns", "server_duration_ns", "failed").rows()
    )


def test_client_server_pair_across_services() -> None:
    spans = frame(
        span("a", "", "gateway", "Server", duration_ms=100),
        span("b", "a", "gateway", "Client", start_ms=5, duration_ms=50, error=True),
        span("c", "b", "engine", "Server", start_ms=10, duration_ms=30),
    )
    assert edges_of(spans) == [
        ("gateway", "engine", "plain", 50 * MS, 30 * MS, True),
        ("user", "gateway", "virtual", 0, 100 * MS, False),
    ]


def test_messaging_pair_and_root_consumer_gets_its_broker() -> None:
    spans = frame(
        span("p", "", "shop", "Producer", duration_ms=2, messaging__system="kafka"),
        span("c", "p", "billing", "Consumer", start_ms=3, duration_ms=4),
        span("r", "", "mailer", "Consumer", trace="t2", duration_ms=1, messaging__system="rabbitmq"),
    )
    assert edges_of(spans) == [
        ("rabbitmq", "mailer", "messaging", 0, 1 * MS, False),
        ("shop", "billing", "messaging", 2 * MS, 4 * MS, False),
    ]


def test_clients_without_a_server_call_virtual_peers() -> None:
    spans = frame(
        span("a", "", "api", "Internal"),
        span("d", "a", "api", "Client", db__system="postgresql", db__namespace="orders", server__address="pg"),
        span("h", "a", "api", "Client", peer__service="payments"),
        span("x", "a", "api", "Client", server__address="search.internal"),
        span("k", "a", "api", "Producer", messaging__system="kafka"),
        span("n", "a", "api", "Client"),
    )
    graph = service_graph(spans)
    assert sorted(graph.edges.select("server", "connection_type").rows()) == [
        ("kafka", "messaging"),
        ("orders", "database"),
        ("payments", "virtual"),
        ("search.internal", "virtual"),
    ]
    assert graph.unpaired_client_spans == [("api", 1)]  # no attribute names the peer of span n


def test_same_service_pairs_orphans_tenants_and_repeated_spans() -> None:
    spans = frame(
        span("a", "", "svc", "Server"),
        span("b", "a", "svc", "Client"),
        span("c", "b", "svc", "Server"),  # a call to itself: no edge, and no virtual peer for b either
        span("o", "gone", "other", "Server", trace="t2"),  # its parent never arrived
        span("o", "gone", "other", "Server", trace="t2"),  # stored twice by a retrying exporter
    ).with_columns(pl.lit("acme").alias("tenant"))
    graph = service_graph(spans)
    assert graph.edges.select("tenant", "client", "server").rows() == [("acme", "user", "svc")]
    assert graph.unpaired_server_spans == [("other", 1)]


def test_processor_counts_first_seen_traces_once_per_batch() -> None:
    written: list[tuple[pl.DataFrame, str | None]] = []

    class Writer:
        def write(self, edges: pl.DataFrame, dedup_token: str | None = None) -> None:
            written.append((edges, dedup_token))

    class Metrics:
        graphs = 0

        def observe_service_graph(self, graph: object, sampled_out: frozenset[str]) -> None:
            Metrics.graphs += 1

    spans = frame(span("a", "", "gw", "Server"), span("z", "", "gw", "Server", trace="t2"))
    processor = ServiceGraphProcessor(Writer(), Metrics())
    first = {"t1".ljust(32, "0")}
    processor.process(spans, None, first)  # type: ignore[arg-type]
    processor.process(spans, None, first)  # type: ignore[arg-type]  # the pipeline retrying the batch
    processor.process(spans, None, set())  # type: ignore[arg-type]  # re-analysis only: nothing new
    assert [edges.height for edges, _ in written] == [1, 1]
    assert written[0][1] == written[1][1] and written[0][1] is not None  # same token: ClickHouse drops the repeat
    assert Metrics.graphs == 1


def test_demo_capture_has_its_eight_services_and_their_client_server_edges(store: ClickHouse) -> None:
    services, pairs = otlp_client_server_pairs(DEMO)
    assert len(services) == 8
    storage = storage_of(store)
    storage.writer.write(demo_batch(DEMO))
    assert run_pipeline(storage) == 141

    edges = storage.reader.service_graph(0, FAR_FUTURE, tenant="default")
    nodes = topology_nodes(edges, storage.reader.rollup_services(0, FAR_FUTURE, tenant="default"))
    assert set(nodes.filter(pl.col("kind") == "service")["id"]) == services
    paired = edges.filter(pl.col("connection_type").is_in(["plain", "messaging"]))
    assert set(zip(paired["client"], paired["server"], strict=True)) == pairs
    # Peers that sent no spans, and the outside caller of root server spans:
    kinds = dict(zip(nodes["id"], nodes["kind"], strict=True))
    assert kinds["cartservice"] == "virtual" and kinds["user"] == "user"
    proxy = edges.filter((pl.col("client") == "frontend-proxy") & (pl.col("server") == "frontend")).row(0, named=True)
    assert proxy["calls"] == 75
    assert proxy["client_p50_ns"] >= proxy["server_p50_ns"] > 0  # the caller waits at least as long

    # A scope reads the calls themselves: a service's calls in and out, an operation's, a request tenant's.
    around = storage.reader.service_graph(0, FAR_FUTURE, tenant="default", scope=EdgeScope(service="frontend"))
    assert around.height and all("frontend" in pair for pair in zip(around["client"], around["server"], strict=True))
    scoped = around.filter((pl.col("client") == "frontend-proxy") & (pl.col("server") == "frontend")).row(0, named=True)
    assert scoped["calls"] == 75 and scoped["server_p50_ns"] > 0
    example = storage.reader.edge_examples("frontend-proxy", "frontend", 0, FAR_FUTURE, tenant="default", limit=1)
    operation = example["server_operation"][0]
    named = storage.reader.service_graph(0, FAR_FUTURE, tenant="default", scope=EdgeScope(operation=operation))
    assert 0 < named["calls"].sum() < edges["calls"].sum()
    nobody = EdgeScope(service="frontend", request_tenant="nobody")  # the demo's requests name no tenant
    assert storage.reader.service_graph(0, FAR_FUTURE, tenant="default", scope=nobody).height == 0
    assert (
        storage.reader.edge_examples("frontend-proxy", "frontend", 0, FAR_FUTURE, tenant="default", scope=nobody).height
        == 0
    )
    topology = window_topology(storage.reader, 0, FAR_FUTURE, tenant="default", scope=EdgeScope(service="frontend"))
    assert "loadgenerator" not in set(topology.nodes["id"]) and "frontend" in set(topology.nodes["id"])


@pytest.mark.parametrize(
    ("files", "virtual"),
    [
        (["zipkin__simple-db-p6.json"], {("bootifulmeters", "app_db", "database")}),
        (["zipkin__messaging.json"], set()),
        (["zipkin__messaging2.json"], {("transfer-service", "rabbitmq", "messaging")}),
        (["zipkin__messaging-kafka.json"], {("servicea", "kafka", "messaging"), ("kafka", "servicea", "messaging")}),
    ],
)
def test_zipkin_database_and_messaging_samples_give_virtual_nodes(
    store: ClickHouse, files: list[str], virtual: set[tuple[str, str, str]]
) -> None:
    storage = storage_of(store)
    summary = import_paths([ZIPKIN / name for name in files], StoreSink(storage.writer), progress=False)
    assert summary.spans and not summary.problems
    run_pipeline(storage)
    edges = storage.reader.service_graph(0, FAR_FUTURE, tenant="default")
    services = storage.reader.rollup_services(0, FAR_FUTURE, tenant="default")
    nodes = topology_nodes(edges, services)
    peers = {
        row
        for row in edges.select("client", "server", "connection_type").rows()
        if not {row[0], row[1]} <= {*services, "user"}
    }
    assert peers == virtual
    assert set(nodes.filter(~pl.col("kind").is_in(["service", "user"]))["id"]) == {
        name for client, server, _ in virtual for name in (client, server) if name not in services
    }
    if files == ["zipkin__messaging.json"]:
        # Producer (frontend) → consumer (backend) through rabbitmq pair up directly, as the connectors pair them.
        assert ("frontend", "backend", "messaging") in edges.select("client", "server", "connection_type").rows()
