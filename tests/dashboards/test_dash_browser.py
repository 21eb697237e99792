"""Headless Chromium against the UI mounted under /ui of a served FastAPI app, over a real embedded store
holding the OpenTelemetry demo capture. Screenshots go to ``test-artifacts/`` at the repository root."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dash_support import mounted_ui, serving
from playwright.sync_api import Browser

from browser_kit import TIMEOUT_MS, click_timeline, new_page, open_trace, screenshot, timeline_total, wait_for_count
from collector.ingest import Ingestor
from query.service import QueryService
from testkit import TRACES, ingest_otlp_json_file

pytestmark = pytest.mark.ui

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
TRACE_ID = "43e16db8b39d2847d082975ab07acfa6"
"""18 spans over 4 services (frontend, recommendationservice, productcatalogservice, flagd)."""
TRACE_SPANS = 18
OPERATION = "grpc.oteldemo.RecommendationService/ListRecommendations"
"""A frontend operation found in 4 traces of the capture, TRACE_ID among them."""


@pytest.fixture
def ui_url(ingestor: Ingestor, query: QueryService) -> Iterator[str]:
    """Base URL of a served FastAPI app with the UI at /ui, holding the demo capture."""
    ingest_otlp_json_file(ingestor, DEMO)
    with serving(mounted_ui(query)) as url:
        yield url


def test_search_page_lists_traces_and_opens_one(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1000)
    page.goto(f"{ui_url}/ui/")
    page.wait_for_selector("#search-results .ag-row", timeout=TIMEOUT_MS)
    assert page.inner_text("#search-count") == "20 traces"
    wait_for_count(page, "#search-results .ag-center-cols-container .ag-row", 20)
    assert page.locator("#search-scatter .scatterlayer .point").count() == 20
    assert "active" in page.get_attribute('#\\{\\"index\\"\\:\\"\\/\\"\\,\\"type\\"\\:\\"nav-link\\"\\}', "class")

    page.click("#search-service")
    page.get_by_role("option", name="frontend", exact=True).click()
    page.click("#search-operation")
    page.get_by_role("option", name=OPERATION, exact=True).click()
    page.click("#search-submit")
    page.wait_for_selector("#search-count:text-is('4 traces')", timeout=TIMEOUT_MS)
    wait_for_count(page, "#search-results .ag-center-cols-container .ag-row", 4)
    assert page.locator(f"#search-results .ag-row[row-id='{TRACE_ID}']").count() == 1
    screenshot(page, "ui-search.png")

    page.click(f"#search-results .ag-row[row-id='{TRACE_ID}'] [col-id='root_name']")
    page.wait_for_url(f"**/ui/trace/{TRACE_ID}", timeout=TIMEOUT_MS)
    page.wait_for_selector("#trace-timeline[data-ready='1']", timeout=TIMEOUT_MS)
    assert timeline_total(page) == TRACE_SPANS
    assert errors == []


def test_trace_page_draws_timeline_and_flame_graph(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1000)
    open_trace(page, f"{ui_url}/ui/trace/{TRACE_ID}")
    page.wait_for_selector(".hs-trace-flame .slice", timeout=TIMEOUT_MS)
    assert timeline_total(page) == TRACE_SPANS
    assert int(page.get_attribute("#trace-timeline", "data-drawn") or 0) == TRACE_SPANS
    assert page.locator(".hs-trace-flame .slice").count() == TRACE_SPANS + 1  # a tile per span under the trace's
    header = page.inner_text("#trace-header")
    assert "HTTP GET" in header and TRACE_ID in header and "18" in header
    assert page.title() == f"Trace {TRACE_ID[:8]} · Hotspan"

    click_timeline(page, 2)
    page.wait_for_selector("#trace-span-detail .hs-kv", timeout=TIMEOUT_MS)
    assert "Span ID" in page.inner_text("#trace-span-detail")
    page.mouse.move(0, 0)  # hide the tooltip so the screenshot shows the whole timeline
    screenshot(page, "ui-trace.png")

    shown = page.inner_text("#trace-span-detail")
    # The flame graph may lie below the fold; mouse clicks need it in view.
    page.locator(".hs-trace-flame .slice").nth(3).scroll_into_view_if_needed()
    tile = page.locator(".hs-trace-flame .slice").nth(3).bounding_box()
    assert tile is not None
    page.mouse.click(tile["x"] + 5, tile["y"] + tile["height"] / 2)
    page.wait_for_function(
        "shown => document.querySelector('#trace-span-detail').innerText !== shown",
        arg=shown,
        timeout=TIMEOUT_MS,
    )
    assert errors == []


def test_trace_lookup_and_bad_ids(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1000)
    page.goto(f"{ui_url}/ui/trace")
    page.wait_for_selector("#trace-header .hs-notice", timeout=TIMEOUT_MS)
    assert "No trace selected" in page.inner_text("#trace-header")

    page.fill("#nav-lookup", "")
    page.press("#nav-lookup", "Enter")
    page.wait_for_selector("#nav-lookup-error:has-text('enter a trace ID')", timeout=TIMEOUT_MS)

    page.fill("#nav-lookup", "not a trace id")
    page.press("#nav-lookup", "Enter")
    page.wait_for_url("**/ui/trace/not%20a%20trace%20id", timeout=TIMEOUT_MS)
    page.wait_for_selector("#trace-header:has-text(\"'not a trace id' is not a trace ID\")", timeout=TIMEOUT_MS)
    assert page.inner_text("#nav-lookup-error") == ""

    page.fill("#nav-lookup", TRACE_ID.upper())
    page.press("#nav-lookup", "Enter")
    page.wait_for_url(f"**/ui/trace/{TRACE_ID}", timeout=TIMEOUT_MS)
    page.wait_for_selector(".hs-trace-flame .slice", timeout=TIMEOUT_MS)

    page.goto(f"{ui_url}/ui/trace/{'f' * 32}")
    page.wait_for_selector("#trace-header:has-text('not found')", timeout=TIMEOUT_MS)
    assert errors == []


def test_trace_lookup_moves_the_address_bar_to_what_it_shows(browser: Browser, ui_url: str) -> None:
    # From an open trace, an unknown ID and then a malformed one: the address follows the page each time.
    page, errors = new_page(browser, height=1000)
    page.goto(f"{ui_url}/ui/trace/{TRACE_ID}")
    page.wait_for_selector(".hs-trace-flame .slice", timeout=TIMEOUT_MS)

    unknown = "0" * 31 + "1"
    page.fill("#nav-lookup", unknown)
    page.press("#nav-lookup", "Enter")
    page.wait_for_selector(f"#trace-header:has-text('Trace {unknown} not found')", timeout=TIMEOUT_MS)
    page.wait_for_url(f"**/ui/trace/{unknown}", timeout=TIMEOUT_MS)

    page.fill("#nav-lookup", "nothex!!")
    page.press("#nav-lookup", "Enter")
    page.wait_for_selector("#trace-header:has-text('is not a trace ID')", timeout=TIMEOUT_MS)
    page.wait_for_url("**/ui/trace/nothex%21%21", timeout=TIMEOUT_MS)
    assert errors == []


def test_the_search_lives_in_the_url(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1000)
    page.goto(f"{ui_url}/ui/")
    page.wait_for_selector("#search-results .ag-row", timeout=TIMEOUT_MS)
    page.click("#search-service")
    page.get_by_role("option", name="frontend", exact=True).click()
    page.fill("#search-min-trace", "100")
    page.click("#search-sort")
    page.get_by_role("option", name="Longest first", exact=True).click()
    page.click("#search-submit")
    page.wait_for_url("**/ui/?*min_trace_ms=100*", timeout=TIMEOUT_MS)
    page.wait_for_selector("#search-count:has-text('longest first')", timeout=TIMEOUT_MS)
    found = page.inner_text("#search-count")
    first = page.locator("#search-results .ag-center-cols-container .ag-row").first.get_attribute("row-id")
    assert "service=frontend" in page.url and "sort=longest" in page.url

    # The address alone brings the same search back: a reload, a bookmark, a link from another page.
    page.reload()
    page.wait_for_selector("#search-count:has-text('longest first')", timeout=TIMEOUT_MS)
    assert page.inner_text("#search-count") == found
    assert page.input_value("#search-min-trace") == "100"
    assert page.locator("#search-results .ag-center-cols-container .ag-row").first.get_attribute("row-id") == first
    durations = page.locator("#search-results .ag-center-cols-container [col-id='duration_ns']").all_inner_texts()
    assert durations and all(text.endswith((" ms", " s")) for text in durations)  # units, not bare numbers
    screenshot(page, "ui-search-url.png")
    assert errors == []
