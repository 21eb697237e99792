"""Golden test on a real Brave/Zipkin production capture (testdata/README.md): 51 records with 13 shared
client/server span IDs and two timestamp-less fragments, converted and imported into chDB.

Expectations are computed here from the raw records by the documented rules (a fragment joins the shared
record on its endpoint; a server half gets the derived ID under its client half; a span under a shared ID
moves to the server half of its own service), not by calling the converter.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from zipkin_kit import TESTDATA, attributes, converted, only, server_half_id

from analysis.tree import build_tree
from hotspan.importer import StoreSink, import_paths
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter

FIXTURE = TESTDATA / "smartthings-mobile-web-install.excerpt.json"
TRACE_ID = "000000000000000014b60fd9ae504820"
ROOT = "682d9e58aab98286"  # post pages/install/complete (strongman); its parent is not in the excerpt


def raw_records() -> list[dict[str, Any]]:
    return json.loads(FIXTURE.read_text())


def server_halves() -> dict[str, dict[str, Any]]:
    """Original span ID → the shared (server-half) record of that ID."""
    return {record["id"]: record for record in raw_records() if record.get("shared")}


def expected_parents() -> dict[str, str | None]:
    """Span ID → parent span ID after the split, from the raw records."""
    halves = server_halves()
    new_ids = {span_id: server_half_id(TRACE_ID, span_id, half["localEndpoint"]) for span_id, half in halves.items()}
    parents: dict[str, str | None] = {}
    for record in raw_records():
        if "timestamp" not in record:
            continue  # a fragment: it joins a span listed anyway
        if record.get("shared"):
            parents[new_ids[record["id"]]] = record["id"]
            continue
        parent = record.get("parentId")
        half = halves.get(parent or "")
        if half is not None and half["localEndpoint"]["serviceName"] == record["localEndpoint"]["serviceName"]:
            parent = new_ids[parent]
        parents[record["id"]] = parent
    return parents


def depth(span_id: str, parents: dict[str, str | None]) -> int:
    parent = parents[span_id]
    return 0 if parent not in parents else 1 + depth(parent, parents)


def test_the_excerpt_is_what_its_readme_says() -> None:
    records = raw_records()
    fragments = [record for record in records if "timestamp" not in record]
    halves = server_halves()

    assert len(records) == 51 and len(halves) == 13
    assert {record["id"] for record in fragments} == {"acf01eee13dd1fba", "02c9ccc069857837"}
    # Every server half has its client half in the file, and each fragment the local endpoint of a server half.
    assert all(any(r["id"] == span_id and r.get("kind") == "CLIENT" for r in records) for span_id in halves)
    assert all(f["localEndpoint"] == halves[f["id"]]["localEndpoint"] and "kind" not in f for f in fragments)


def test_fragments_merge_and_shared_halves_split_as_documented() -> None:
    spans = converted(FIXTURE)
    parents = expected_parents()

    assert len(spans) == len(parents) == 49
    assert {span["spanId"]: span.get("parentSpanId") for span in spans} == parents
    for span_id in ("acf01eee13dd1fba", "02c9ccc069857837"):
        half = server_halves()[span_id]
        span = only(spans, spanId=server_half_id(TRACE_ID, span_id, half["localEndpoint"]))
        assert span["name"] == half["name"]
        assert span["startTimeUnixNano"] == f"{half['timestamp']}000"
        assert attributes(span) == {
            **{key: {"stringValue": value} for key, value in half["tags"].items()},
            "network.local.address": {"stringValue": half["localEndpoint"]["ipv4"]},
            "network.local.port": {"intValue": str(half["localEndpoint"]["port"])},
            "zipkin.shared": {"boolValue": True},
            "zipkin.original_span_id": {"stringValue": span_id},
            "zipkin.merged_records": {"intValue": "2"},
        }


def test_import_gives_every_span_one_parent_and_the_tree_its_depth(store: ClickHouse) -> None:
    summary = import_paths([FIXTURE], StoreSink(ClickHouseTraceWriter(store)), progress=False)
    stored = ClickHouseTraceReader(store).trace(TRACE_ID, tenant=ALL_TENANTS)
    parents = expected_parents()

    assert (summary.spans, summary.rejected, summary.problems) == (49, 0, [])
    assert stored["span_id"].n_unique() == stored.height == 49
    assert dict(zip(stored["span_id"], stored["parent_span_id"], strict=True)) == {
        span_id: parent or "" for span_id, parent in parents.items()
    }

    tree = build_tree(stored)
    frame = tree.frame()
    assert tree.duplicates.height == 0
    assert frame.filter(frame["parent_span_id"] == "")["span_id"].to_list() == [ROOT]
    assert frame.filter(frame["span_id"] == ROOT)["root_reason"].to_list() == ["orphan"]
    assert dict(zip(frame["span_id"], frame["depth"], strict=True)) == {s: depth(s, parents) for s in parents}
    assert int(np.max(tree.depth)) == 9
    # Above a Cassandra call at the bottom: each RPC as a client half with its server half under it.
    services = dict(zip(stored["span_id"], stored["service_name"], strict=True))
    chain, span_id = [], "297e4838ced4beee"
    while (parent := parents[span_id]) in parents:
        chain.append(services[parent])
        span_id = parent
    assert chain == [
        "auth",
        "coreSrv",
        "coreSrv",
        "bookie",
        "bookie",
        "platformapi",
        "platformapi",
        "strongman",
        "strongman",
    ]
