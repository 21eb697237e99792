"""Headless Chromium: bad input leaves a page in a clear error state, never stale results or a spinner that waits
for good (issue 31, item 4). The UI is mounted under /ui of a served FastAPI app over a real embedded store
holding the OpenTelemetry demo capture. Screenshots go to ``test-artifacts/`` at the repository root
(``ui-bad-*.png``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_kit import layout_database
from dash_support import mounted_ui, serving
from playwright.sync_api import Browser, Page

from browser_kit import TIMEOUT_MS, new_page, screenshot, wait_for_count
from collector.ingest import Ingestor
from dashboards.pages.search import NO_RESULTS
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES, ingest_otlp_json_file, query_room

pytestmark = pytest.mark.ui

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
DEMO_TRACES = 20
ROWS = "#search-results .ag-center-cols-container .ag-row"


@pytest.fixture(scope="module")
def ui_url(chdb_dsn: str, layout: str) -> Iterator[str]:
    """Base URL of a served FastAPI app with the UI at /ui, holding the demo capture; one per module (the tests
    only read)."""
    with layout_database(chdb_dsn, layout) as store:
        ingest_otlp_json_file(Ingestor(ClickHouseTraceWriter(store)), DEMO)
        with serving(mounted_ui(query_room(store))) as url:
            yield url


def wait_for_message(page: Page, says: str) -> None:
    """Wait until the search form's message line reads ``says`` (a part of it)."""
    page.wait_for_function(
        "says => (document.getElementById('search-message')?.innerText ?? '').includes(says)",
        arg=says,
        timeout=TIMEOUT_MS,
    )


def assert_no_results(page: Page) -> None:
    """The search's error state: no rows, no count, the scatter saying why instead of "Searching…"."""
    page.wait_for_function(
        "text => (document.getElementById('search-scatter')?.innerText ?? '').includes(text)",
        arg=NO_RESULTS,
        timeout=TIMEOUT_MS,
    )
    assert page.locator(ROWS).count() == 0
    assert page.inner_text("#search-count") == ""
    assert "Searching" not in page.inner_text("body")


def test_a_bad_time_range_clears_the_previous_results(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1000)
    page.goto(f"{ui_url}/ui/")
    page.wait_for_selector(f"#search-count:text-is('{DEMO_TRACES} traces')", timeout=TIMEOUT_MS)
    wait_for_count(page, ROWS, DEMO_TRACES)

    page.fill("#search-start", "2024-10-30 13:00")
    page.fill("#search-end", "2024-10-30 12:00")
    page.press("#search-end", "Enter")
    wait_for_message(page, "the time range ends before it starts")
    assert_no_results(page)
    screenshot(page, "ui-bad-range-after-results.png")
    assert errors == []


def test_a_bad_range_in_the_url_shows_the_error_not_searching(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=1000)
    page.goto(f"{ui_url}/ui/?start=yesterday-ish&end=2024-10-30+12%3A00")
    wait_for_message(page, "'yesterday-ish' is not a time")
    assert_no_results(page)
    screenshot(page, "ui-bad-range-in-url.png")
    assert errors == []


def test_an_unknown_trace_id_says_not_found_and_loads_nothing(browser: Browser, ui_url: str) -> None:
    page, errors = new_page(browser, height=800)
    unknown = "f" * 32
    page.goto(f"{ui_url}/ui/trace/{unknown}")
    page.wait_for_selector(f"#trace-header h2:text-is('Trace {unknown} not found')", timeout=TIMEOUT_MS)
    # No empty panels wait for a trace that is not there.
    for panel in ("#trace-timeline", "#trace-flame-box", "#trace-stages"):
        assert page.locator(panel).count() == 0, panel
    assert "Loading" not in page.inner_text("body")
    screenshot(page, "ui-bad-trace-id.png")

    # No ID at all: the page says to pick one, and the flame graph's box does not wait for it.
    page.goto(f"{ui_url}/ui/trace")
    page.wait_for_selector("#trace-header h2:text-is('No trace selected')", timeout=TIMEOUT_MS)
    assert page.inner_text("#trace-flame-box") == "No trace."
    assert "Loading" not in page.inner_text("body")
    assert errors == []
