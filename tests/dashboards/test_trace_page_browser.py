"""The trace page in headless Chromium, on real traces (the SmartThings Zipkin capture, Jaeger UI's GenAI agent
trace, the OpenTelemetry demo) and a generated 10k-span agent trace: the virtualised timeline, collapsing,
the minimap's time window, search in the trace, aggregated repeated siblings, span details and the
one-read-per-page-load rule. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from dash_support import mounted_ui, serving
from playwright.sync_api import Browser, Page

from browser_kit import (
    TIMELINE_ROWS_JS,
    TIMEOUT_MS,
    click_timeline,
    new_page,
    open_trace,
    screenshot,
    timeline_row,
    timeline_total,
    wait_total,
)
from dashboards.trace_panels import FIRST_WINDOW_ROWS
from hotspan.importer import StoreSink, import_paths
from query.trace_view_cache import TraceViews
from storage.clickhouse import ClickHouse
from storage.writer import ClickHouseTraceWriter
from synthetic_traces import agent_trace
from testkit import REPO, TRACES, CountingTraceReader, query_room

pytestmark = pytest.mark.ui

SMARTTHINGS = TRACES / "zipkin" / "zipkin__smartthings-oauth-authorization.json"
SMARTTHINGS_TRACE = "00000000000000008ce82b2e9ed820ba"
GENAI = REPO / "tests" / "realworld" / "public" / "jaegerui__genai_timeline.json"
GENAI_TRACE = "4a1b2c3d4e5f60718293a4b5c6d7e8f9"
"""Jaeger UI's GenAI timeline fixture: 59 spans whose childless graphql.execution wrapper adopts the agent."""
DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
DEMO_TRACE = "43e16db8b39d2847d082975ab07acfa6"
BIG_TRACE = "5ca1ab1e" * 4
WIDGET_JS = "document.getElementById('trace-timeline').hsTimeline"


@dataclass
class Served:
    url: str
    views: TraceViews
    reader: CountingTraceReader


@pytest.fixture(scope="module")
def served(chdb_dsn: str) -> Iterator[Served]:
    """The UI over one store holding the real captures and a generated 10k-span trace (module-wide: storing and
    serving cost seconds, and the tests only read)."""
    import uuid

    from storage.migrations import apply_migrations

    store = ClickHouse(chdb_dsn, f"t_{uuid.uuid4().hex[:12]}")
    apply_migrations(store)
    import_paths([SMARTTHINGS, GENAI, DEMO], StoreSink(ClickHouseTraceWriter(store)), progress=False)
    ClickHouseTraceWriter(store).write(agent_trace(10_000, trace_id=BIG_TRACE))
    query = query_room(store)
    with serving(mounted_ui(query)) as url:
        yield Served(url, query.views, query.store)
    store.command(f"DROP DATABASE IF EXISTS {store.database}")
    store.close()


def _detail(page: Page) -> str:
    return page.inner_text("#trace-span-detail")


def test_a_real_trace_collapses_expands_and_opens_spans_reading_it_once(browser: Browser, served: Served) -> None:
    page, errors = new_page(browser, height=1300)
    spans = served.reader.trace(SMARTTHINGS_TRACE, tenant=None).height
    reads = served.reader.span_reads  # after the test's own read above
    open_trace(page, f"{served.url}/ui/trace/{SMARTTHINGS_TRACE}")
    assert timeline_total(page) == spans  # a small trace: nothing aggregated, nothing collapsed
    assert "Most of this trace's time is" in page.inner_text("#trace-stages")
    # Header and stage panel are static HTML (one Dash component each), drawn as the same elements.
    assert page.locator("#trace-header .hs-facts .hs-fact dd").count() == 6
    assert page.locator("#trace-stages .hs-stage-legend .hs-stage-chip .hs-swatch").count() >= 1
    assert page.locator(".hs-trace .hs-section-title h3").all_inner_texts() == [
        "Stages",
        "Timeline",
        "Agent graph",
        "Flame graph",
    ]
    assert page.inner_text(".hs-nav-link.active") == "Trace"  # highlighted in the browser, for /ui/trace/<id>
    # A 1.43 ms root above 1.7 min of redirects reads as a root that never ended (issue 27): the request's window is
    # the envelope of its spans on every view, the page says so, and the Stages page no longer attributes otherwise.
    assert "The request's window is the envelope of its spans" in page.inner_text("body")
    assert "The Stages page counts this request as its window's" not in page.inner_text("#trace-stages")

    page.fill("#trace-depth", "1")
    page.click("#trace-collapse-depth")
    wait_total(page, f"total < {spans}")
    collapsed = timeline_total(page)
    root = timeline_row(page, 0)
    assert root["depth"] == 0 and root["flags"] & 4  # has children, still open at depth 0
    child = next(row for row in page.evaluate(TIMELINE_ROWS_JS) if row["depth"] == 1 and row["hidden"] > 0)
    click_timeline(page, child["position"], toggle=True)
    # Its children appear, themselves collapsed (they are below depth 1 too).
    wait_total(page, f"total > {collapsed}")
    assert timeline_row(page, child["position"])["hidden"] == 0

    # A click anywhere on a row (here on its label, far from the bar) opens that span.
    click_timeline(page, child["position"], x=160)
    page.wait_for_selector("#trace-span-detail .hs-kv", timeout=TIMEOUT_MS)
    assert "Untraced (own) time" in _detail(page) and "On the critical path" in _detail(page)

    page.click("#trace-expand-critical")
    wait_total(page, "total > 0")
    page.click("#trace-expand-all")
    wait_total(page, f"total === {spans}")
    page.mouse.move(0, 0)
    screenshot(page, "ui-trace-smartthings.png")
    # Scrolling, collapsing and opening spans read the kept view: one read for the page load.
    assert served.reader.span_reads == reads + 1
    assert errors == []


def test_the_first_paint_carries_a_screenful_and_the_rest_follows(browser: Browser, served: Served) -> None:
    page, errors = new_page(browser)
    open_trace(page, f"{served.url}/ui/trace/{SMARTTHINGS_TRACE}")
    widget = WIDGET_JS
    spans = served.reader.trace(SMARTTHINGS_TRACE, tenant=None).height
    assert spans > FIRST_WINDOW_ROWS
    # The page's starting data: the first rows only, enough for the first view.
    assert page.evaluate(f"() => {widget}.meta.rows.rows.span.length") == FIRST_WINDOW_ROWS
    assert page.evaluate(f"() => {widget}.viewHeight") / 22 < FIRST_WINDOW_ROWS
    # After the first paint the widget asks for a full window: here the whole trace.
    page.wait_for_function(f"() => {widget}.win.rows.span.length === {spans}", timeout=TIMEOUT_MS)
    assert page.evaluate(f"() => {widget}.win.offset") == 0
    # Scrolled to its end, the last rows are drawn from that window ("…" stands for rows not yet fetched).
    page.evaluate("() => { const s = document.getElementById('trace-scroll'); s.scrollTop = s.scrollHeight; }")
    last = spans - 1
    page.wait_for_function(f"() => ({TIMELINE_ROWS_JS})().some(row => row.position === {last})", timeout=TIMEOUT_MS)
    in_view = page.evaluate(f"() => Math.ceil({widget}.viewHeight / 22)")
    assert int(page.get_attribute("#trace-timeline", "data-drawn") or 0) >= in_view - 1
    assert errors == []


def test_the_flame_graph_loads_when_scrolled_near(browser: Browser, served: Served) -> None:
    page, errors = new_page(browser, height=700)
    page.goto(f"{served.url}/ui/trace/{SMARTTHINGS_TRACE}")
    page.wait_for_selector("#trace-timeline[data-ready='1']", timeout=TIMEOUT_MS)
    page.wait_for_selector("#trace-request-facts > *", state="attached", timeout=TIMEOUT_MS)
    # Painted, its request facts in, the flame graph far below the fold: neither it nor Plotly has loaded.
    page.wait_for_function(f"() => {WIDGET_JS}.win.rows.span.length > {FIRST_WINDOW_ROWS}", timeout=TIMEOUT_MS)
    assert "Loading" in page.inner_text("#trace-flame-box")
    assert page.evaluate("() => window.Plotly === undefined")
    page.locator("#trace-flame-box").scroll_into_view_if_needed()
    page.wait_for_selector(".hs-trace-flame .slice", timeout=TIMEOUT_MS)
    assert errors == []


def test_the_minimap_window_zooms_the_timeline(browser: Browser, served: Served) -> None:
    page, errors = new_page(browser, height=1200)
    open_trace(page, f"{served.url}/ui/trace/{SMARTTHINGS_TRACE}")
    zoom_js = "() => document.getElementById('trace-timeline').hsTimeline.zoom"
    duration = page.evaluate("() => document.getElementById('trace-timeline').hsTimeline.meta.duration")
    assert page.evaluate(zoom_js) == [0, duration]
    box = page.locator("#trace-minimap").bounding_box()
    bar_x = page.evaluate("() => document.getElementById('trace-timeline').hsTimeline.barX")
    bar_width = page.evaluate("() => document.getElementById('trace-timeline').hsTimeline.barWidth")
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + bar_x + bar_width * 0.2, y)
    page.mouse.down()
    page.mouse.move(box["x"] + bar_x + bar_width * 0.45, y, steps=5)
    page.mouse.up()
    start, end = page.evaluate(zoom_js)
    assert start == pytest.approx(0.2 * duration, rel=0.02) and end == pytest.approx(0.45 * duration, rel=0.02)
    # Dragging the window pans it, keeping its width.
    page.mouse.move(box["x"] + bar_x + bar_width * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + bar_x + bar_width * 0.4, y, steps=5)
    page.mouse.up()
    panned = page.evaluate(zoom_js)
    assert panned[1] - panned[0] == pytest.approx(end - start, rel=1e-6) and panned[0] > start
    page.mouse.move(0, 0)
    screenshot(page, "ui-trace-zoomed.png")
    page.click("#trace-reset-zoom")
    assert page.evaluate(zoom_js) == [0, duration]
    assert errors == []


def test_search_in_a_trace_reveals_and_counts_matches(browser: Browser, served: Served) -> None:
    page, errors = new_page(browser, height=1200)
    open_trace(page, f"{served.url}/ui/trace/{BIG_TRACE}")
    page.fill("#trace-search", "0000012c00000003")  # the 300th step's vLLM span, hidden in an aggregate
    page.press("#trace-search", "Enter")
    page.wait_for_selector("#trace-search-count:has-text('1 of 1 match')", timeout=TIMEOUT_MS)
    page.wait_for_function(
        f"() => ({TIMELINE_ROWS_JS})().some(row => row.flags & 128 && row.name === 'llm_request')", timeout=TIMEOUT_MS
    )
    page.fill("#trace-search", "SELECT")
    page.press("#trace-search", "Enter")
    page.wait_for_selector("#trace-search-count:has-text('of 7,485 matches')", timeout=TIMEOUT_MS)
    page.click("#trace-search-next")
    page.wait_for_selector("#trace-search-count:has-text('2 of 7,485')", timeout=TIMEOUT_MS)
    page.mouse.move(0, 0)
    screenshot(page, "ui-trace-search.png")
    assert errors == []


def test_a_ten_thousand_span_trace_aggregates_and_scrolls(browser: Browser, served: Served) -> None:
    page, errors = new_page(browser, height=1300)
    open_trace(page, f"{served.url}/ui/trace/{BIG_TRACE}")
    assert timeline_total(page) == 3
    steps = timeline_row(page, 2)
    assert steps["count"] == 499 and steps["name"] == "agent.step" and steps["flags"] & 16
    assert "LLM decode" in page.inner_text("#trace-dominant-stage")
    page.wait_for_selector("#trace-request-facts:has-text('499')", timeout=TIMEOUT_MS)
    assert "tokens" in page.inner_text("#trace-request-facts")

    # The aggregate's detail lists its slowest spans; one click opens one.
    click_timeline(page, 2)
    page.wait_for_selector("#trace-span-detail .hs-member", timeout=TIMEOUT_MS)
    assert "×499" in _detail(page)
    page.locator("#trace-span-detail .hs-member").first.click()
    page.wait_for_selector("#trace-span-detail:has-text('Untraced (own) time')", timeout=TIMEOUT_MS)

    click_timeline(page, 2, toggle=True)
    wait_total(page, "total === 2996")
    screenshot(page, "ui-trace-10k.png")
    # Only the rows in view are drawn; scrolling far fetches the window there.
    page.evaluate("() => { const s = document.getElementById('trace-scroll'); s.scrollTop = s.scrollHeight; }")
    page.wait_for_function(f"() => ({TIMELINE_ROWS_JS})().some(row => row.position > 2900)", timeout=TIMEOUT_MS)
    drawn = int(page.get_attribute("#trace-timeline", "data-drawn") or 0)
    assert 0 < drawn < 60
    # The vLLM span's detail splits it into its phases and shows its model call.
    page.evaluate("() => { document.getElementById('trace-scroll').scrollTop = 0; }")
    page.wait_for_function(f"() => ({TIMELINE_ROWS_JS})().some(row => row.position === 4)", timeout=TIMEOUT_MS)
    assert timeline_row(page, 4)["name"] == "llm_request"
    click_timeline(page, 4)
    page.wait_for_selector("#trace-span-detail:has-text('Stage pieces')", timeout=TIMEOUT_MS)
    detail = _detail(page)
    assert "LLM queue" in detail and "LLM decode" in detail and "llama-3-8b" in detail and "tokens" in detail
    assert " ms (0." in detail  # vLLM's seconds attributes shown as durations with the raw value beside
    page.mouse.move(0, 0)
    screenshot(page, "ui-trace-10k-detail.png")
    assert errors == []


def test_an_adjusted_genai_trace_marks_the_moved_span(browser: Browser, served: Served) -> None:
    page, errors = new_page(browser, height=1200)
    open_trace(page, f"{served.url}/ui/trace/{GENAI_TRACE}")
    assert "analysed under another parent" in page.inner_text("#trace-header")
    # The agent graph loads after the header (it read "Loading…" once on a loaded host).
    page.wait_for_selector("#trace-agent-graph:has-text('on the critical path')", timeout=TIMEOUT_MS)
    graph = page.inner_text("#trace-agent-graph")
    assert "agent triage-agent" in graph and "→ model" in graph and "on the critical path" in graph, graph
    assert page.locator("#trace-agent-graph .hs-agent-critical").count() >= 1
    # The request facts above the timeline and the flame graph below it load after the first paint: click once
    # the page has settled, or the row may have moved under the pointer.
    page.wait_for_selector(".hs-trace-flame .slice", timeout=TIMEOUT_MS)
    adjusted = next(row for row in page.evaluate(TIMELINE_ROWS_JS) if row["flags"] & 32)
    click_timeline(page, adjusted["position"])
    page.wait_for_selector("#trace-span-detail:has-text('Adjusted')", timeout=TIMEOUT_MS)
    page.mouse.move(0, 0)
    screenshot(page, "ui-trace-genai.png")
    assert errors == []


def test_pages_run_without_dashs_polyfill(browser: Browser, served: Served) -> None:
    """The page loads no @babel/polyfill (dashboards/polyfill.py); the flame graph, a dcc.Graph that Dash's lazy
    loader brings in through a regenerator-compiled async function, still draws; the asset standing in for the
    polyfill's regenerator runs that function's state machine to its end."""
    page, errors = new_page(browser)
    open_trace(page, f"{served.url}/ui/trace/{GENAI_TRACE}")
    page.wait_for_selector(".hs-trace-flame .slice", timeout=TIMEOUT_MS)
    assert page.evaluate("() => window._babelPolyfill === undefined")
    assert page.locator("script[src*='polyfill']").count() == 0
    steps = page.evaluate(
        """() => {
            let ready = false;
            const run = regeneratorRuntime.mark(function loader() {
                return regeneratorRuntime.wrap(function (context) {
                    for (;;) switch (context.prev = context.next) {
                        case 0: return context.next = 2, "awaited";
                        case 2: ready = context.sent;
                        case 3: case "end": return context.stop();
                    }
                }, loader);
            });
            const generator = run();
            const steps = [generator.next(), generator.next(true), generator.next()];
            return [...steps.map((step) => [step.value ?? null, step.done]), ready];
        }"""
    )
    assert steps == [["awaited", False], [None, True], [None, True], True]
    assert errors == []
