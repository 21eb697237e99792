"""The Stages page's data quality on real captures broken the way the wild breaks them (issue 27): three libraries'
captures, one whole, one whose root spans never arrived, one whose parents all ended in the middle of their last
child (a handler that returned the stream it did not read), stored through the real decode path and analysed by
the trace pipeline. The stored summaries, the analysis service's counts and examples, and the page's section (its
callback run over HTTP through the ``/ui`` mount, as the browser runs it) must all say the same as the analysis of
the spans read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import polars as pl
from dash_support import mounted_ui, serving

from analysis import STAGES, analyze, data_quality
from collector.ingest import Ingestor
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.trace_pipeline import TracePipeline
from query.service import QueryService
from storage.analysis_store import AnalysisFilter, ClickHouseAnalysisStore
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from testkit import dash_update_body, ingest_otlp_json_file

CAPTURES = Path(__file__).parents[1] / "realworld" / "captures"
WHOLE, ROOTLESS, EARLY = "langgraph", "anthropic_sdk", "pydantic_ai"
"""The capture left whole, the one whose roots are dropped, the one whose parents end early (engine on, streamed)."""


def _spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def _broken(driver: str, tmp_path: Path) -> tuple[Path, list[str]]:
    """The driver's capture (engine spans on, streamed) broken as its name says, written to ``tmp_path``; and its
    requests' trace IDs."""
    stem = CAPTURES / driver / "engine-on-stream"
    document = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
    truth = json.loads(stem.with_name(stem.name + ".truth.json").read_text(encoding="utf-8"))
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            if driver == ROOTLESS:
                scope["spans"] = [span for span in scope["spans"] if span.get("parentSpanId")]
    if driver == EARLY:
        last: dict[tuple[str, str], dict[str, Any]] = {}
        for span in sorted(_spans(document), key=lambda span: int(span["startTimeUnixNano"])):
            last[(span["traceId"], span.get("parentSpanId", ""))] = span
        for span in _spans(document):
            if child := last.get((span["traceId"], span["spanId"])):
                middle = (int(child["startTimeUnixNano"]) + int(child["endTimeUnixNano"])) // 2
                span["endTimeUnixNano"] = str(min(int(span["endTimeUnixNano"]), middle))
    path = tmp_path / f"{driver}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path, [request["trace_id"] for request in truth["requests"]]


def _stages_quality(url: str) -> dict[str, Any]:
    """The Stages page's data-quality section over every stored request, as its callback renders it."""
    dependencies = httpx.get(f"{url}/ui/_dash-dependencies", timeout=30).json()
    (dependency,) = [d for d in dependencies if "stages-quality.children" in d["output"]]
    body = dash_update_body(dependency, {"stages-lookback.value": "all"})
    answer = httpx.post(f"{url}/ui/_dash-update-component", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["response"]["stages-quality"]["children"]


def _strings(tree: object) -> list[str]:
    """Every string in a rendered component tree (its texts and its links' targets), depth first."""
    if isinstance(tree, str):
        return [tree]
    if isinstance(tree, list):
        return [text for item in tree for text in _strings(item)]
    if isinstance(tree, dict):
        props = tree.get("props", {})
        return [*([props["href"]] if "href" in props else []), *_strings(props.get("children"))]
    return []


def _row(tree: object, repair: str) -> list[str]:
    """The texts of the section's row of ``repair``."""
    if isinstance(tree, dict):
        if tree.get("props", {}).get("id") == f"stages-quality-{repair}":
            return _strings(tree)
        return _row(tree.get("props", {}).get("children"), repair)
    if isinstance(tree, list):
        return next((found for item in tree if (found := _row(item, repair))), [])
    return []


def test_the_stages_page_counts_each_repair_of_real_broken_captures(
    store: ClickHouse, ingestor: Ingestor, query: QueryService, tmp_path: Path
) -> None:
    requests = {}
    for driver in (WHOLE, ROOTLESS, EARLY):
        path, trace_ids = _broken(driver, tmp_path)
        assert all(result.rejected == 0 for result in ingest_otlp_json_file(ingestor, path))
        requests[driver] = trace_ids
    pipeline = TracePipeline(
        ClickHouseAnalysisStore(store, STAGES), ClickHouseTraceReader(store), TracePipelineConfig()
    )
    assert pipeline.run_once(force=True).analysed >= sum(map(len, requests.values()))

    # What the analysis of the spans read back says, request by request.
    reader = ClickHouseTraceReader(store)
    every = [trace_id for trace_ids in requests.values() for trace_id in trace_ids]
    quality = data_quality(analyze(reader.traces(every, tenant=ALL_TENANTS).drop("tenant")))
    expected = {
        "enveloped": set(quality.filter("envelope")["trace_id"]),
        "attached": set(quality.filter(pl.col("parentless_spans") > 1)["trace_id"]),
        "outliving": set(quality.filter(pl.col("extended_spans") > 0)["trace_id"]),
        "implausible_root": set(quality.filter("implausible_root")["trace_id"]),
    }
    # The broken captures say so, every request of them: a missing root's window is the envelope, with its orphans
    # attached; work that outlived the parents that ended early is kept, its ancestors extended.
    assert set(requests[ROOTLESS]) <= expected["enveloped"] & expected["attached"]
    assert set(requests[EARLY]) <= expected["outliving"]
    assert not set(requests[WHOLE]) & (expected["enveloped"] | expected["attached"])

    # The stored summaries, counted over the window, and the longest of each repair.
    service = query.analysis
    (counts,) = service.stages(AnalysisFilter(), tenant=ALL_TENANTS).quality.iter_rows(named=True)
    assert counts["requests"] == len(every) and counts["unrecorded"] == 0
    assert {repair: counts[repair] for repair in expected} == {repair: len(ids) for repair, ids in expected.items()}
    assert counts["reattached"] == (quality["reattached_spans"] > 0).sum()
    examples = service.quality_examples(AnalysisFilter(), 3, tenant=ALL_TENANTS)
    assert set(examples) == {repair for repair, ids in expected.items() if ids}
    assert all(
        len(ids) == min(3, len(expected[repair])) and set(ids) <= expected[repair] for repair, ids in examples.items()
    )

    # The page shows the same counts, each repair's share of the requests, and links to its longest requests.
    longest = service.quality_examples(AnalysisFilter(), tenant=ALL_TENANTS)
    with serving(mounted_ui(query)) as url:
        section = _stages_quality(url)
    for repair, ids in expected.items():
        row = _row(section, repair)
        assert row[1] == f"{len(ids):,}" and row[2] == f"{len(ids) / len(every):.1%}"
        assert [text for text in row if text.startswith("/ui/trace/")] == [
            f"/ui/trace/{i}" for i in longest.get(repair, [])
        ]
