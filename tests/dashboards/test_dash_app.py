"""The app factory: built twice in one process, mounted under /ui of FastAPI and served by uvicorn, with
its callbacks answering over HTTP against a real embedded store."""

from __future__ import annotations

import json
import re
import time

import dash
import httpx
import pytest
from dash_support import mounted_ui, serving

from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from dashboards.app import PAGES, build_dash_app
from query.service import QueryService
from storage.ids import short_trace_id
from testkit import TRACES, dash_update_body, ingest_otlp_json_file

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
LARGEST_DEMO_TRACE = "43e16db8b39d2847d082975ab07acfa6"
"""An 18-span, 4-service trace of the demo capture (frontend → recommendation/product catalog/flagd)."""


def _callback_body(dependencies: list[dict], output_fragment: str, values: dict[str, object]) -> dict:
    """The request the browser sends to run the callback whose output names ``output_fragment``; its
    inputs and states come from ``/_dash-dependencies``, filled from ``values`` (``"id.prop" → value``,
    missing ones None)."""
    (dependency,) = [d for d in dependencies if output_fragment in d["output"]]
    return dash_update_body(dependency, values)


def _call(base_url: str, output_fragment: str, values: dict[str, object]) -> dict:
    """Run a callback over HTTP through the ``/ui`` mount; returns its ``response`` (``id → prop → value``)."""
    dependencies = httpx.get(f"{base_url}/ui/_dash-dependencies", timeout=30).json()
    body = _callback_body(dependencies, output_fragment, values)
    response = httpx.post(f"{base_url}/ui/_dash-update-component", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["response"]


def _page(base_url: str, path: str) -> dict:
    """The layout Dash's pages router renders for ``path`` (the browser's first callback on a page)."""
    answer = _call(
        base_url, "_pages_content.children", {"_pages_location.pathname": path, "_pages_location.search": ""}
    )
    return answer["_pages_content"]["children"]


def _component(tree: object, component_id: str) -> dict:
    """The props of the component with ``component_id`` in a layout's JSON."""
    if isinstance(tree, dict):
        props = tree.get("props", {})
        if props.get("id") == component_id:
            return props
        for value in (props.get("children"), *tree.values()):
            if isinstance(value, dict | list) and (found := _find(value, component_id)) is not None:
                return found
    elif isinstance(tree, list):
        for item in tree:
            if (found := _find(item, component_id)) is not None:
                return found
    raise LookupError(component_id)


def _find(tree: object, component_id: str) -> dict | None:
    try:
        return _component(tree, component_id)
    except LookupError:
        return None


def test_building_twice_in_one_process_is_safe(query: QueryService) -> None:
    first = build_dash_app(query)
    second = build_dash_app(query, requests_pathname_prefix="/other/")
    assert [page["module"] for page in dash.page_registry.values()] == [page.module for page in PAGES]
    for app, prefix in ((first, "/ui/"), (second, "/other/")):
        client = app.server.test_client()
        index = client.get("/")
        assert index.status_code == 200
        assert f"{prefix}_dash-component-suites/".encode() in index.data
        assert f"{prefix}assets/hotspan.css".encode() in index.data
        assert client.get("/_dash-layout").status_code == 200
        outputs = {d["output"] for d in json.loads(client.get("/_dash-dependencies").data)}
        assert "search-service.options" in outputs
        assert any("trace-rows.data" in output for output in outputs)


def test_mounted_under_ui_in_fastapi(ingestor: Ingestor, query: QueryService) -> None:
    ingest_otlp_json_file(ingestor, DEMO)
    with serving(mounted_ui(query)) as url:
        assert httpx.get(f"{url}/ui").status_code == 307  # Starlette adds the slash
        for path in ("/ui/", f"/ui/trace/{LARGEST_DEMO_TRACE}", "/ui/trace"):
            page = httpx.get(f"{url}{path}")
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            assert "/ui/_dash-component-suites/" in page.text
        css = httpx.get(f"{url}/ui/assets/hotspan.css")
        assert css.status_code == 200 and ".hs-nav" in css.text
        # Versioned by Dash (?m=mtime), so kept by the browser: no revalidation round trip before scripts run.
        assert "max-age=31536000" in css.headers["cache-control"]

        services = _call(url, "search-service.options", {"search-init.data": True})
        assert services["search-service"]["options"][0] == "adservice"
        assert len(services["search-service"]["options"]) == 8

        found = _call(
            url,
            "search-results.rowData",
            {"search-lookback.value": "all", "search-limit.value": 200, "search-service.value": "frontend"},
        )
        rows = found["search-results"]["rowData"]
        assert found["search-count"]["children"] == f"{len(rows)} traces"
        assert rows and all(row["trace"].startswith("[") and "](/ui/trace/" in row["trace"] for row in rows)
        assert LARGEST_DEMO_TRACE in {row["trace_id"] for row in rows}

        errors_only = _call(url, "search-results.rowData", {"search-status.value": "Error", "search-limit.value": 200})
        error_rows = errors_only["search-results"]["rowData"]
        assert error_rows and all(row["error_count"] > 0 for row in error_rows)

        invalid = _call(url, "search-results.rowData", {"search-attributes.value": "no-equals-sign"})
        assert "is not key=value" in invalid["search-message"]["children"]

        # The trace page's layout reads the trace and carries the timeline's starting data (one round trip).
        loaded = _page(url, f"/ui/trace/{LARGEST_DEMO_TRACE}")
        meta = _component(loaded, "trace-meta")["data"]
        assert meta["span_count"] == 18 and len(meta["services"]) == 4
        assert meta["rows"]["total"] == 18 and len(meta["rows"]["rows"]["span"]) == 18
        details = _call(url, "trace-flame-box.children", {"trace-meta.data": meta, "trace-flame-wanted.data": "1"})
        assert details["trace-flame-box"]["children"]["props"]["figure"]["data"][0]["type"] == "icicle"
        window = _call(
            url,
            "trace-rows.data",
            {"trace-request.data": {"trace_id": LARGEST_DEMO_TRACE, "seq": 3, "offset": 5, "limit": 4}},
        )
        assert window["trace-rows"]["data"]["seq"] == 3
        assert window["trace-rows"]["data"]["rows"]["offset"] == 5
        assert len(window["trace-rows"]["data"]["rows"]["rows"]["span"]) == 4

        missing = _page(url, f"/ui/trace/{'f' * 32}")
        assert "not found" in json.dumps(_component(missing, "trace-header"))

        # A short ID (the first 8 or 16 characters other pages show) opens the one trace it starts.
        for short in (LARGEST_DEMO_TRACE[:16], LARGEST_DEMO_TRACE[:8].upper()):
            meta = _component(_page(url, f"/ui/trace/{short}"), "trace-meta")["data"]
            assert meta["trace_id"] == LARGEST_DEMO_TRACE and meta["span_count"] == 18


@pytest.mark.parametrize("raw", ["not-a-trace-id", "ABC"])
def test_malformed_trace_ids_get_a_message(query: QueryService, raw: str) -> None:
    app = build_dash_app(query)
    client = app.server.test_client()
    dependencies = json.loads(client.get("/_dash-dependencies").data)
    body = _callback_body(dependencies, "_pages_content.children", {"_pages_location.pathname": f"/ui/trace/{raw}"})
    response = client.post("/_dash-update-component", json=body)
    assert response.status_code == 200
    page = response.get_json()["response"]["_pages_content"]["children"]
    assert "is not a trace ID" in json.dumps(_component(page, "trace-header"))
    assert _component(page, "trace-meta")["data"] is None


def test_a_short_id_several_traces_start_lists_them(ingestor: Ingestor, query: QueryService) -> None:
    ids = ["abcdef01" + "1" * 24, "abcdef01" + "2" * 24, "abcdef02" + "3" * 24]
    spans = [
        {
            "traceId": tid,
            "spanId": "00000000000000a1",
            "name": "op",
            "kind": 2,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000001000000",
        }
        for tid in ids
    ]
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
                "scopeSpans": [{"spans": spans}],
            }
        ]
    }
    ingestor.export(request_from_json(body)[0])
    app = build_dash_app(query)
    client = app.server.test_client()
    dependencies = json.loads(client.get("/_dash-dependencies").data)

    def page(path: str) -> dict:
        body = _callback_body(dependencies, "_pages_content.children", {"_pages_location.pathname": path})
        return client.post("/_dash-update-component", json=body).get_json()["response"]["_pages_content"]["children"]

    several = json.dumps(_component(page("/ui/trace/abcdef01"), "trace-header"))
    assert "starts several traces" in several and ids[0] in several and ids[1] in several and ids[2] not in several
    assert _component(page("/ui/trace/abcdef02"), "trace-meta")["data"]["trace_id"] == ids[2]
    assert "is not a trace ID" in json.dumps(_component(page("/ui/trace/abcdef03"), "trace-header"))


def test_a_64_bit_trace_opens_from_the_short_id_pages_show(ingestor: Ingestor, query: QueryService) -> None:
    # Zipkin and Jaeger IDs are 64-bit: stored padded with 16 zeros, shown by their digits (storage.ids).
    span = {
        "traceId": "1234abcd5678ef90",
        "spanId": "00000000000000a1",
        "name": "op",
        "kind": 2,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000001000000",
    }
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
                "scopeSpans": [{"spans": [span]}],
            }
        ]
    }
    ingestor.export(request_from_json(body)[0])
    stored = "0" * 16 + "1234abcd5678ef90"
    assert short_trace_id(stored) == "1234abcd"
    app = build_dash_app(query)
    client = app.server.test_client()
    dependencies = json.loads(client.get("/_dash-dependencies").data)
    for path in ("/ui/trace/1234abcd", "/ui/trace/1234ABCD5678", "/ui/trace/1234abcd5678ef90"):
        body = _callback_body(dependencies, "_pages_content.children", {"_pages_location.pathname": path})
        page = client.post("/_dash-update-component", json=body).get_json()["response"]["_pages_content"]["children"]
        assert _component(page, "trace-meta")["data"]["trace_id"] == stored, path


def test_the_layout_holds_the_page_its_referrer_opens(ingestor: Ingestor, query: QueryService) -> None:
    ingest_otlp_json_file(ingestor, DEMO)
    with serving(mounted_ui(query)) as url:

        def layout(referrer: str | None) -> dict:
            headers = {"Referer": referrer} if referrer is not None else {}
            answer = httpx.get(f"{url}/ui/_dash-layout", headers=headers, timeout=60)
            assert answer.status_code == 200
            return answer.json()

        # The trace page's HTML starts reading the trace, while the browser would still be running the page's scripts.
        path = f"/ui/trace/{LARGEST_DEMO_TRACE}"
        reads = query.store.span_reads
        assert httpx.get(f"{url}{path}", timeout=60).status_code == 200
        deadline = time.monotonic() + 30
        while query.store.span_reads == reads and time.monotonic() < deadline:
            time.sleep(0.02)
        assert query.store.span_reads == reads + 1
        # Its layout: the page, its model found kept (one read for the page load), and a Location already at the
        # address (so the router stays idle).
        opened = layout(f"{url}{path}")
        assert _component(opened, "trace-meta")["data"]["span_count"] == 18
        assert query.store.span_reads == reads + 1
        assert _component(opened, "_pages_location")["pathname"] == path
        assert _component(opened, "_pages_location")["search"] == ""
        assert _component(opened, "_pages_store")["data"] == {"title": f"Trace {LARGEST_DEMO_TRACE[:8]} · Hotspan"}
        # A query string reaches the page as the router passes it, and the Location carries it as the browser does.
        searched = layout(f"{url}/ui/?service=frontend")
        assert _component(searched, "_pages_location")["search"] == "?service=frontend"
        assert _component(searched, "search-service")["value"] == "frontend"

        # No referrer, another host's or an address outside the app: the router fills the page, as Dash does.
        other_host = url.replace("127.0.0.1", "localhost")
        for referrer in (None, "", f"{url}/elsewhere/trace/{LARGEST_DEMO_TRACE}", f"{other_host}{path}"):
            empty = layout(referrer)
            assert _component(empty, "_pages_content").get("children") is None, referrer
            assert "pathname" not in _component(empty, "_pages_location"), referrer


def test_grid_and_graph_libraries_load_on_first_use(query: QueryService) -> None:
    app = build_dash_app(query)
    client = app.server.test_client()
    index = client.get("/trace").data.decode()
    config = json.loads(re.search(r'<script id="hs-lazy-libraries" type="application/json">(.*?)</script>', index)[1])
    assert set(config) == {"dash_ag_grid", "dash_cytoscape"}
    assert config["dash_ag_grid"]["components"] == ["AgGrid"]
    for library in config.values():
        (script,) = library["scripts"]
        # Not run by every page, still served and kept a year like Dash's own bundles.
        assert f'src="{script}"' not in index
        answer = client.get(script.removeprefix("/ui"))
        assert answer.status_code == 200 and "max-age=31536000" in answer.headers["Cache-Control"]
    assert "/ui/assets/lazy_libraries.js" in index
    # Built again in the same process (as tests do), the app still knows where the libraries are.
    again = build_dash_app(query).server.test_client().get("/trace").data.decode()
    assert config["dash_ag_grid"]["scripts"][0] in again
