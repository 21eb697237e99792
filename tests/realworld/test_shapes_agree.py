"""Every reader names one root and accounts for the whole trace, on real captures as sent and broken the way the wild
breaks them: public files of other projects (``shapes/``, ``public/``) and one golden capture per real library.

Per mutation (:data:`MUTATIONS`), every trace is stored through the collector's decode path (OTLP/JSON) and:

- the search's root (:data:`storage.trace_sql.SEARCH`, the trace list of the REST, Jaeger, Tempo and MCP searches) is
  the analysis' root (``SpanTree.primary_root``: the trace page, ``/stages`` and the stored summaries): the service and
  name of the span without a parent ID, else of the span whose parent the trace lacks, the longest first;
- the trace page's stage totals and its waiting time (``StageLane.waiting_ns``) sum to the trace's duration, where no
  two roots run at once (the files of ``shapes/`` and ``public/``: a view a trace);
- a request whose root span arrived is never said to miss it (``data_quality``).

Found by trying new public captures (the ``shapes/`` files, 2026-12-06): with the root dropped and work outliving the
span that started it, the search named a descendant (the longest span), the trace page the longest orphan; two
spans without a parent ID were named by their earliest start in the search and by their length in the analysis; the
trace page's stage totals left out the time a child started after its parent returned.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import polars as pl
import pytest
import shape_mutations
from test_capture_analysis import CASES, truth_of

from analysis import analyze, data_quality
from analysis.tree import SpanTree
from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from hotspan.importer import StoreSink, import_paths
from query.trace_model import build_trace_view
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES, migrated_database

HERE = Path(__file__).parent
FILES = sorted((HERE / "shapes").glob("*.json")) + sorted((HERE / "public").glob("*.json"))
"""Other projects' files: each is imported into a database of its own (two of them share trace IDs)."""
KIND_CODE = {"Unspecified": 0, "Internal": 1, "Server": 2, "Client": 3, "Producer": 4, "Consumer": 5}


def _second_root(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    """A span below the root loses its parent ID (context not propagated into a callback): two parentless spans."""
    child = spans.filter(pl.col("parent_span_id") != "").group_by("trace_id").agg(pl.col("span_id").min())
    lost = pl.concat_str("trace_id", "span_id").is_in(
        child.select(pl.concat_str("trace_id", "span_id")).to_series().implode()
    )
    return spans.with_columns(pl.when(lost).then(pl.lit("")).otherwise("parent_span_id").alias("parent_span_id"))


def _lost_parent(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    """One span between the root and its children never arrives (an exporter dropped it): its children are orphans
    under a root that did arrive."""
    parents = spans.select("trace_id", pl.col("parent_span_id").alias("span_id")).unique()
    middle = spans.filter(pl.col("parent_span_id") != "").join(parents, on=["trace_id", "span_id"])
    gone = middle.group_by("trace_id").agg(pl.col("span_id").min())
    return spans.join(gone, on=["trace_id", "span_id"], how="anti")


def _then(*steps: shape_mutations.Mutation) -> shape_mutations.Mutation:
    def mutate(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
        for step in steps:
            spans = step(spans, kept)
        return spans

    return mutate


MUTATIONS: dict[str, Callable[[pl.DataFrame, Collection[str]], pl.DataFrame]] = {
    "as_sent": lambda spans, kept: spans,
    "drop_root": shape_mutations.drop_root,
    "drop_root_late_children": _then(shape_mutations.late_children, shape_mutations.drop_root),
    "drop_root_early_parents": _then(shape_mutations.early_parents, shape_mutations.drop_root),
    "second_root": _second_root,
    "lost_parent": _lost_parent,
}


def _otlp_json(spans: pl.DataFrame) -> dict:
    """``spans`` (the reader's columns) as one OTLP/JSON request, a resource per service; names, kinds, IDs and
    times as they are (attributes are not what these checks read)."""
    services: dict[str, list[dict]] = {}
    for span in spans.iter_rows(named=True):
        encoded = {
            "traceId": span["trace_id"],
            "spanId": span["span_id"],
            "name": span["name"],
            "kind": KIND_CODE[span["kind"]],
            "startTimeUnixNano": str(span["start_time_unix_nano"]),
            "endTimeUnixNano": str(span["end_time_unix_nano"]),
        }
        if span["parent_span_id"]:
            encoded["parentSpanId"] = span["parent_span_id"]
        services.setdefault(span["service_name"], []).append(encoded)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "shapes"}, "spans": encoded_spans}],
            }
            for service, encoded_spans in services.items()
        ]
    }


def _read_all(store: ClickHouse) -> pl.DataFrame:
    reader = ClickHouseTraceReader(store)
    trace_ids = reader.search(TraceQuery(limit=10_000), tenant=ALL_TENANTS)["trace_id"].to_list()
    return reader.traces(trace_ids, tenant=ALL_TENANTS).drop("tenant")  # one read, not one per trace


@pytest.fixture(scope="module")
def corpus(chdb_dsn: str) -> Iterator[tuple[pl.DataFrame, frozenset[str]]]:
    """Every trace of :data:`FILES` and of one golden capture per library, read back as stored, trace IDs made unique
    per file; and the trace IDs of :data:`FILES`."""
    frames = []
    for path in FILES:
        with migrated_database(chdb_dsn, "agree") as store:
            summary = import_paths([path], StoreSink(ClickHouseTraceWriter(store)), progress=False)
            assert summary.rejected == 0, summary.problems
            frames.append(_unique_ids(_read_all(store), path.name))
    public = frozenset(pl.concat(frames)["trace_id"].unique())
    with migrated_database(chdb_dsn, "agree") as store:
        paths = sorted({truth_of(driver, True, True)[0] for driver, _, _ in CASES})
        assert import_paths(paths, StoreSink(ClickHouseTraceWriter(store)), progress=False).rejected == 0
        frames.append(_read_all(store))
    yield pl.concat(frames), public


def _unique_ids(spans: pl.DataFrame, salt: str) -> pl.DataFrame:
    return spans.with_columns(
        pl.col("trace_id").map_elements(
            lambda trace_id: hashlib.blake2b(f"{salt}/{trace_id}".encode(), digest_size=16).hexdigest(),
            return_dtype=pl.String,
        )
    )


def _roots_differ(found: pl.DataFrame, tree: SpanTree) -> pl.DataFrame:
    """The traces of a search's answer (``found``) whose root service or name is not the analysis' root in ``tree``."""
    roots = tree.spans.select("trace_id", "service_name", "name").gather(tree.primary_root)
    named = found.select("trace_id", "root_service", "root_name").join(roots, on="trace_id")
    return named.filter((pl.col("root_service") != pl.col("service_name")) | (pl.col("root_name") != pl.col("name")))


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_every_reader_names_one_root_and_the_whole_duration(
    chdb_dsn: str, corpus: tuple[pl.DataFrame, frozenset[str]], mutation: str
) -> None:
    whole, public = corpus
    spans = MUTATIONS[mutation](whole, frozenset())
    with migrated_database(chdb_dsn, "agree") as store:
        result = Ingestor(ClickHouseTraceWriter(store)).export(*request_from_json(_otlp_json(spans)))
        assert result.rejected == 0, result
        found = ClickHouseTraceReader(store).search(TraceQuery(limit=10_000), tenant=ALL_TENANTS)
    analysis = analyze(spans)
    assert found.height == analysis.tree.primary_root.size > 50
    differ = _roots_differ(found, analysis.tree)
    assert differ.is_empty(), differ.head(5).to_dicts()

    genuine = analysis.reported_tree.root_reason[analysis.reported_tree.primary_root] == 1
    notes = data_quality(analysis)["notes"].to_list()
    said = [
        note for trace, arrived in zip(notes, genuine, strict=True) if arrived for note in trace if "missing" in note
    ]
    assert not said, said[:3]
    if mutation in ("lost_parent", "second_root"):
        assert any("without a parent" in note for trace in notes for note in trace)

    for trace_id in sorted(public & set(spans["trace_id"])):
        view = build_trace_view(trace_id, spans.filter(pl.col("trace_id") == trace_id))
        lane = view.lane
        if not lane.overlapping:
            assert int(lane.totals_ns.sum()) + lane.waiting_ns == view.duration_ns, trace_id


SHARED_FILES = sorted(path for kind in ("jaeger", "otlp", "zipkin") for path in (TRACES / kind).iterdir())
"""The public trace files of ``../shared/data/traces`` (Jaeger, OTLP and Zipkin; the invalid ones aside)."""


def test_the_search_names_the_analysis_root_of_every_shared_file(chdb_dsn: str) -> None:
    """Each file stored under a tenant of its own, as ``hotspan import`` stores it: the search's root of every trace
    is the analysis' root of the trace as the trace pipeline reads it back (all at once) and as the trace page does
    (one by one, the first three). Jaeger UI's ``ui_01`` and ``domain_01`` have two roots with one span ID, start and
    duration, differing by name: the search named either, the analysis the copy it keeps."""
    compared = 0
    with migrated_database(chdb_dsn, "agree_shared") as store:
        for index, path in enumerate(SHARED_FILES):
            import_paths([path], StoreSink(ClickHouseTraceWriter(store), tenant=f"file{index}"), progress=False)
        reader = ClickHouseTraceReader(store)
        for index, path in enumerate(SHARED_FILES):
            tenant = f"file{index}"
            found = reader.search(TraceQuery(limit=10_000), tenant=tenant)
            trace_ids = found["trace_id"].to_list()
            reads = [reader.traces(trace_ids, tenant=tenant)] if trace_ids else []
            reads += [reader.trace(trace_id, tenant=tenant) for trace_id in trace_ids[:3]]
            for spans in reads:
                tree = analyze(spans).tree
                assert set(found["trace_id"]) >= set(tree.spans["trace_id"]), path.name
                differ = _roots_differ(found, tree)
                assert differ.is_empty(), (path.name, differ.head(3).to_dicts())
                compared += tree.primary_root.size
    assert compared > 200
