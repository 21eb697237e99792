"""Headless Chromium against the analysis UI of a served Hotspan (one per module): the OpenTelemetry demo
capture posted to ``/v1/traces``, the trace pipeline run once, then the trace page's critical path and stage
bar, and the Stages, Hotspots and Diagnosis pages. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from cluster_kit import layout_settings
from playwright.sync_api import Browser

from browser_kit import TIMELINE_ROWS_JS, TIMEOUT_MS, new_page, open_trace, screenshot
from testkit import TRACES, serve_in_process

pytestmark = pytest.mark.ui

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
TRACE_ID = "43e16db8b39d2847d082975ab07acfa6"
"""18 spans over 4 services in the capture."""

ICICLE_TILES_JS = """
id => {
  const trace = document.querySelector(`#${id} .js-plotly-plot`).data[0];
  return trace && trace.type === 'icicle' ? trace.ids.length : 0;
}
"""
"""Tiles of a figure's icicle (0 when it is not one, e.g. the "nothing to draw" figure)."""


@pytest.fixture(scope="module")
def served(chdb_dsn: str, layout: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a served Hotspan once the capture is stored and analysed; one per module (the tests only read)."""
    with layout_settings(chdb_dsn, layout, "s") as where:
        running = serve_in_process(chdb_dsn, tmp_path_factory.mktemp("served"), **where)
        try:
            with httpx.Client(base_url=running.base_url, timeout=30) as client:
                for line in DEMO.read_text().splitlines():
                    if line.strip():
                        answer = client.post("/v1/traces", content=line, headers={"Content-Type": "application/json"})
                        assert answer.status_code == 200, answer.text
            assert running.pipeline is not None and running.pipeline.flush()
            assert running.trace_pipeline is not None
            # Forced: the capture's traces are quiet already, no need to wait trace_idle_s.
            assert running.trace_pipeline.run_once(force=True).analysed > 0
            yield running.base_url
        finally:
            running.stop()


def test_analysis_pages_render_from_a_served_hotspan(browser: Browser, served: str) -> None:
    page, errors = new_page(browser, height=1100)

    # Trace page: the critical path marked on the timeline's rows, and the stage panel naming the dominant stage.
    open_trace(page, f"{served}/ui/trace/{TRACE_ID}")
    assert any(row["flags"] & 2 for row in page.evaluate(TIMELINE_ROWS_JS))  # on the critical path
    assert page.locator("#trace-stages .hs-stage-chip").count() >= 1
    assert page.inner_text("#trace-dominant-stage")
    screenshot(page, "ui-trace-critical-path.png")

    # Stages: shares over time, the percentile table and the latency facts.
    page.goto(f"{served}/ui/stages")
    page.wait_for_selector("#stages-table .hs-stage-row", timeout=TIMEOUT_MS)
    page.wait_for_selector("#stages-shares .bars path", timeout=TIMEOUT_MS)
    assert any(ch.isdigit() for ch in page.text_content("#stages-fact-e2e") or "")
    screenshot(page, "ui-stages.png")

    # Hotspots: both rankings and the aggregated flame graph.
    page.goto(f"{served}/ui/hotspots")
    page.wait_for_selector("#hotspots-by-total .hs-hotspot-row", timeout=TIMEOUT_MS)
    assert page.locator("#hotspots-by-p95 .hs-hotspot-row").count() > 0
    page.wait_for_function(f"() => ({ICICLE_TILES_JS})('hotspots-flame') > 1", timeout=TIMEOUT_MS)
    page.wait_for_selector("#hotspots-flame .iciclelayer .slice", timeout=TIMEOUT_MS)
    screenshot(page, "ui-hotspots.png")

    # Diagnosis: cards, or the "no findings" state on this demo capture; the summary counts the requests.
    page.goto(f"{served}/ui/diagnosis")
    page.wait_for_selector("#diagnosis-summary:has-text('requests analysed')", timeout=TIMEOUT_MS)
    page.wait_for_selector("#diagnosis-findings .hs-finding, #diagnosis-findings .hs-no-findings", timeout=TIMEOUT_MS)
    links = page.locator("#diagnosis-findings .hs-examples a")
    if links.count():
        href = links.first.get_attribute("href")
        assert href is not None and href.startswith("/ui/trace/")
    nav = page.get_attribute('#\\{\\"index\\"\\:\\"\\/diagnosis\\"\\,\\"type\\"\\:\\"nav-link\\"\\}', "class")
    assert nav is not None and "active" in nav
    screenshot(page, "ui-diagnosis.png")
    assert errors == []


def test_aggregate_rows_drill_down_to_their_traces_with_the_scope_in_the_url(browser: Browser, served: str) -> None:
    page, errors = new_page(browser, height=1100)
    # A scope in the URL fills the field and narrows the rows: the Stages page of one root service.
    page.goto(f"{served}/ui/stages?service=frontend&lookback=all")
    page.wait_for_selector("#stages-table .hs-stage-row", timeout=TIMEOUT_MS)
    assert page.input_value("#stages-service") == "frontend"
    example = page.locator("#stages-table .hs-example").first
    trace_href = example.get_attribute("href")
    assert trace_href is not None and trace_href.startswith("/ui/trace/")
    # Each stage's full list is its own search: the scope's requests where that stage took longest.
    searches = page.eval_on_selector_all("#stages-table .hs-drill", "links => links.map(a => a.getAttribute('href'))")
    assert len(set(searches)) == len(searches) > 1, searches
    search = searches[0]
    assert "service=frontend" in search and "sort=longest_stage" in search and "stage=" in search
    screenshot(page, "ui-stages-scoped.png")

    # A scope typed in the field goes to the URL.
    page.fill("#stages-service", "checkoutservice")
    page.press("#stages-service", "Enter")
    page.wait_for_url("**/ui/stages?*service=checkoutservice*", timeout=TIMEOUT_MS)

    # An example trace opens its trace page; the search link lists the scope's traces by that stage's time.
    page.goto(f"{served}{trace_href}")
    page.wait_for_selector("#trace-timeline[data-ready='1']", timeout=TIMEOUT_MS)
    page.goto(f"{served}{search}")
    page.wait_for_selector("#search-count:has-text('first, of all that spent time in it')", timeout=TIMEOUT_MS)
    assert page.inner_text("#search-message") == ""
    # The grid's script loads when the grid is first drawn (dashboards/lazy_libraries.py), maybe after the count.
    page.wait_for_selector("#search-results .ag-center-cols-container .ag-row", timeout=TIMEOUT_MS)
    durations = page.evaluate(
        "() => [...document.querySelectorAll('#search-results .ag-center-cols-container .ag-row')]"
        ".sort((a, b) => Number(a.getAttribute('row-index')) - Number(b.getAttribute('row-index')))"
        ".map(row => row.querySelector(\"[col-id='duration_ns']\").innerText)"
    )
    assert durations and all(text.endswith(("s", "min")) for text in durations)  # with their units

    # Hotspots: a (service, operation) row links to its heaviest traces and its search.
    page.goto(f"{served}/ui/hotspots?lookback=all")
    page.wait_for_selector("#hotspots-by-total .hs-hotspot-row .hs-example", timeout=TIMEOUT_MS)
    drill = page.locator("#hotspots-by-total .hs-hotspot-row .hs-drill").first.get_attribute("href")
    assert drill is not None and "operation=" in drill and "sort=longest" in drill
    screenshot(page, "ui-hotspots-drill.png")
    assert errors == []


OTHER_TRACE = "42a60545a48cfbdacf669252d09c5f76"
"""A 2-span frontend trace of the capture."""


def test_comparison_of_two_traces_and_of_slow_requests_with_the_baseline(browser: Browser, served: str) -> None:
    page, errors = new_page(browser, height=1200)
    open_trace(page, f"{served}/ui/trace/{TRACE_ID}")
    page.click("#trace-compare-link")
    page.wait_for_url(f"**/ui/compare?a={TRACE_ID}", timeout=TIMEOUT_MS)
    page.fill("#compare-b", OTHER_TRACE)
    page.click("#compare-traces")
    page.wait_for_url(f"**/ui/compare?a={TRACE_ID}&b={OTHER_TRACE}", timeout=TIMEOUT_MS)
    page.wait_for_selector("#compare-traces-result .hs-compare-path", timeout=TIMEOUT_MS)
    structure = page.inner_text("#compare-structure")
    assert "only in A" in structure and "only in B" in structure
    assert page.locator(".hs-compare-side").count() == 2
    assert page.locator("#compare-traces-result .hs-compare-stage").count() >= 1
    screenshot(page, "ui-compare-traces.png")

    page.goto(f"{served}/ui/compare?lookback=all")
    page.click("#compare-window")
    # The summary's element is on the page before the comparison's callback fills it: wait for its text.
    page.wait_for_selector("#compare-window-summary:has-text('against the other')", timeout=TIMEOUT_MS)
    assert page.locator(".hs-window-attribute").count() > 0
    assert "lookback=all" in page.url
    screenshot(page, "ui-compare-window.png")
    assert errors == []
