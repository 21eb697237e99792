"""Headless Chromium against the Services and Topology pages, mounted under /ui of a served FastAPI app over a
real embedded store holding the OpenTelemetry demo capture (its rollups filled by ingest and by the trace
pipeline). Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from a2wsgi import WSGIMiddleware
from fastapi import FastAPI
from playwright.sync_api import Browser
from topology_support import demo_batch, run_pipeline, serving, storage_of

from browser_kit import TIMEOUT_MS, new_page, screenshot
from dashboards.app import build_dash_app
from storage.clickhouse import ClickHouse
from testkit import TRACES, query_room

pytestmark = pytest.mark.ui

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"


@pytest.fixture
def ui_url(store: ClickHouse) -> Iterator[str]:
    storage = storage_of(store)
    storage.writer.write(demo_batch(DEMO))
    run_pipeline(storage)
    api = FastAPI()
    api.mount("/ui", WSGIMiddleware(build_dash_app(query_room(store)).server))  # type: ignore[arg-type]
    with serving(api) as url:
        yield url


def test_services_page_shows_red_table_with_sparklines(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1100)
    page.goto(f"{ui_url}/ui/services")
    page.wait_for_selector("#services-table .hs-red-row", timeout=TIMEOUT_MS)
    rows = page.locator("#services-table .hs-red-row")
    assert rows.count() == 7  # the demo services with SERVER spans: all but the load generator
    assert rows.first.locator("td").first.inner_text() == "frontend"  # busiest first
    assert rows.first.locator("img").count() == 2
    # The capture's few calls over all stored time: a rate per minute, hour or day, never "2.44e-07" (issue 31).
    rate = rows.first.locator("td").nth(2).inner_text()
    assert re.fullmatch(r"[0-9.,]+/(s|min|h|day)", rate), rate
    page.wait_for_selector("#services-latency .scatterlayer .trace", timeout=TIMEOUT_MS)
    assert "HOTSPAN_PROMETHEUS_URL" in page.inner_text("#services-engine")
    page.wait_for_selector("#services-capacity .hs-capacity-status", timeout=TIMEOUT_MS)
    assert "HOTSPAN_PROMETHEUS_URL is not set" in page.inner_text("#services-capacity")  # one line, no empty box
    page.wait_for_selector("#services-tiers .hs-hint", timeout=TIMEOUT_MS)
    assert "carries an admission tier" in page.inner_text("#services-tiers")  # the demo has no tiers
    nav = page.get_attribute('#\\{\\"index\\"\\:\\"\\/services\\"\\,\\"type\\"\\:\\"nav-link\\"\\}', "class")
    assert nav is not None and "active" in nav

    page.click("#services-group-by label:has-text('Operation')")
    page.wait_for_selector("#services-table td:has-text('frontend · ')", timeout=TIMEOUT_MS)
    screenshot(page, "ui-services.png")
    assert errors == []


def test_topology_page_draws_graph_and_lists_edge_traces(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1100)
    page.goto(f"{ui_url}/ui/topology")
    page.wait_for_selector("#topology-summary:has-text('nodes')", timeout=TIMEOUT_MS)
    assert page.inner_text("#topology-summary").startswith("10 nodes · 14 edges")
    # The demo's services make no model or tool calls: the Agents card reads the window's requests and says so.
    page.wait_for_selector("#topology-agents:has-text('requests')", timeout=TIMEOUT_MS)
    assert "No agent, model, tool or retrieval calls recognised" in page.inner_text("#topology-agents")
    page.wait_for_function("() => document.querySelector('#topology-graph canvas') !== null", timeout=TIMEOUT_MS)
    screenshot(page, "ui-topology.png")

    # Cytoscape draws on canvas: find the edge's rendered midpoint through the cytoscape instance and click it.
    point = page.evaluate(
        """() => {
          const cy = document.querySelector('#topology-graph')._cyreg.cy;
          const edge = cy.edges().filter(e => e.data('source') === 'frontend-proxy' && e.data('target') === 'frontend');
          const p = edge.renderedMidpoint();
          const box = cy.container().getBoundingClientRect();
          return {x: box.left + p.x, y: box.top + p.y};
        }"""
    )
    page.mouse.click(point["x"], point["y"])
    page.wait_for_selector("#topology-examples li a", timeout=TIMEOUT_MS)
    assert "frontend-proxy → frontend" in page.inner_text("#topology-edge-detail")
    first = page.locator("#topology-examples li a").first
    href = first.get_attribute("href")
    assert href is not None and href.startswith("/ui/trace/") and len(href.rsplit("/", 1)[1]) == 32
    search = page.get_attribute("#topology-search", "href")
    assert search is not None and "service=frontend-proxy" in search and "sort=longest" in search
    first.click()
    page.wait_for_url("**/ui/trace/*", timeout=TIMEOUT_MS)
    page.wait_for_selector("#trace-timeline[data-ready='1']", timeout=TIMEOUT_MS)
    assert errors == []


def test_topology_scope_lives_in_the_url(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1100)
    page.goto(f"{ui_url}/ui/topology?service=frontend")
    page.wait_for_selector("#topology-summary:has-text('nodes')", timeout=TIMEOUT_MS)
    assert page.input_value("#topology-service") == "frontend"
    shown = page.evaluate("() => document.querySelector('#topology-graph')._cyreg.cy.nodes().map(n => n.id())")
    assert "frontend" in shown and "loadgenerator" not in shown  # frontend's calls in and out only
    screenshot(page, "ui-topology-scoped.png")
    page.fill("#topology-service", "")
    page.fill("#topology-operation", "nothing-has-this-name")
    page.press("#topology-operation", "Enter")
    page.wait_for_url("**operation=nothing-has-this-name**", timeout=TIMEOUT_MS)
    page.wait_for_selector("#topology-summary:has-text('0 edges')", timeout=TIMEOUT_MS)
    assert "service=" not in page.url
    assert errors == []


def test_clicking_a_service_focuses_the_graph_on_its_neighbourhood(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1100)
    page.goto(f"{ui_url}/ui/topology")
    page.wait_for_selector("#topology-summary:has-text('10 nodes')", timeout=TIMEOUT_MS)
    page.wait_for_function("() => document.querySelector('#topology-graph canvas') !== null", timeout=TIMEOUT_MS)
    point = page.evaluate(
        """() => {
          const cy = document.querySelector('#topology-graph')._cyreg.cy;
          const p = cy.getElementById('recommendationservice').renderedPosition();
          const box = cy.container().getBoundingClientRect();
          return {x: box.left + p.x, y: box.top + p.y};
        }"""
    )
    page.mouse.click(point["x"], point["y"])
    page.wait_for_selector("#topology-summary:has-text('neighbourhood')", timeout=TIMEOUT_MS)
    assert "recommendationservice" in page.inner_text("#topology-focus")
    assert "recommendationservice" in page.inner_text("#topology-edge-detail")
    search = page.get_attribute("#topology-edge-detail a.hs-drill", "href")
    assert search is not None and "service=recommendationservice" in search
    # One hop either way: its callers and callees, nothing further.
    shown = page.evaluate(
        "() => document.querySelector('#topology-graph')._cyreg.cy.nodes().map(n => [n.id(), n.hasClass('focus')])"
    )
    assert ["recommendationservice", True] in shown and len(shown) < 10
    assert {name for name, _focus in shown} >= {"frontend", "productcatalogservice"}
    screenshot(page, "ui-topology-focus.png")
    page.click("#topology-hops")
    page.get_by_role("option", name="any", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#topology-graph')._cyreg.cy.nodes().length > " + str(len(shown)),
        timeout=TIMEOUT_MS,
    )
    assert errors == []
