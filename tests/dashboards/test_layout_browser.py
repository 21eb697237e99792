"""Headless Chromium: every page of the UI, at 1280 and 1920 px wide, keeps its content within its cards (issue 31,
item 5). A served Hotspan holds a run of the instrumented agent stack (the demo's traces, analysed); each page is
loaded at each width, checked for anything wider than its card or the window, and saved as
``test-artifacts/ui-layout-<page>-<width>.png`` for a person to look at."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from browser_kit import TIMEOUT_MS, new_page, open_trace, screenshot
from dashboards.colors import STAGE_LABELS
from hotspan.server import RunningServer
from instrumented_stack.runner import run_stack
from storage.analysis_store import AnalysisFilter
from storage.tenancy import ALL_TENANTS
from testkit import serve_in_process

pytestmark = pytest.mark.ui

REQUESTS = 12
"""Requests of the stack's run: every stage and service of the demo, in a few seconds."""
WIDTHS = (1280, 1920)
"""The narrowest and widest screens the layout is made for (issue 31: no clipped content at 1280-1920 px)."""
ANALYSED_TIMEOUT_S = 60.0
"""How long the trace pipeline may take to analyse the run (its traces go quiet after 1 s here)."""

OVERFLOW_JS = """() => {
  const problems = [];
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth + 1) problems.push(`page ${page.scrollWidth} px wide in ${page.clientWidth}`);
  for (const card of document.querySelectorAll('.hs-card')) {
    const name = card.id || card.querySelector('h2, h3')?.innerText.split('\\n')[0] || card.className;
    if (card.scrollWidth > card.clientWidth + 1) {
      problems.push(`card ${name}: ${card.scrollWidth} > ${card.clientWidth}`);
    }
    const box = card.getBoundingClientRect();
    for (const item of card.querySelectorAll('a, label, th, td, button, h2, h3, h4, p')) {
      const rect = item.getBoundingClientRect();
      if (rect.width && (rect.right > box.right + 1 || rect.left < box.left - 1)) {
        const text = item.innerText.slice(0, 40);
        problems.push(`${name}: ${item.tagName} '${text}' ends at ${rect.right}, card ${box.right}`);
      }
    }
  }
  for (const grid of document.querySelectorAll('.ag-center-cols-viewport')) {
    if (grid.scrollWidth > grid.clientWidth + 1) {
      problems.push(`grid scrolls sideways: ${grid.scrollWidth} > ${grid.clientWidth}`);
    }
  }
  for (const value of document.querySelectorAll('.ag-cell .ag-cell-value')) {
    if (value.scrollWidth > value.clientWidth + 1 || value.scrollHeight > value.clientHeight + 1) {
      const column = value.closest('.ag-cell').getAttribute('col-id');
      const text = value.innerText.slice(0, 40);
      const needs = `${value.scrollWidth} x ${value.scrollHeight} px`;
      problems.push(`grid cell ${column} '${text}' cut: ${needs} in ${value.clientWidth} x ${value.clientHeight}`);
    }
  }
  return problems;
}"""
"""Everything clipped or overflowing on the page: the page wider than the window, a card whose content is wider
than it, a link, label, cell, button or heading reaching out of its card, a grid that scrolls sideways, a grid cell
whose text is cut (AG Grid ends it with an ellipsis)."""

LABEL_CUT_JS = """([column, labels]) => {
  const cell = document.querySelector(`.ag-row .ag-cell[col-id="${column}"]`);
  if (!cell) return [`(no ${column} cell to try them in)`];
  // A wrapping column's text sits in the cell itself.
  const value = cell.querySelector('.ag-cell-value') || cell;
  const shown = value.innerText;
  const cut = labels.filter(label => {
    value.innerText = label;
    return value.scrollWidth > value.clientWidth + 1 || value.scrollHeight > value.clientHeight + 1;
  });
  value.innerText = shown;
  return cut;
}"""
"""The labels among ``labels`` that a cell of the search grid's ``column`` would cut, each tried in its first row."""

READY = {
    "search": "#search-results .ag-row",
    "services": "#services-table .hs-red-row",
    "topology": "#topology-summary:has-text('nodes')",
    "stages": "#stages-table .hs-drill",
    "hotspots": "#hotspots-by-total .hs-drill",
    "diagnosis": "#diagnosis-summary:has-text('requests')",
    "incidents": "#incidents-list .hs-hint",
    "throughput": "#throughput-table .hs-drill",
    "compare": "#compare-window-result table",
    "conversations": "#conversations-list .hs-conversation-row",
    "conversation": ".hs-turns .hs-turn-row",
}
"""Per page (its path below /ui/, ``search`` for the first), what shows once its content is in."""


@pytest.fixture
def stack_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    """A served Hotspan holding a run of the instrumented stack, every trace of it analysed."""
    server = serve_in_process(chdb_dsn, tmp_path, "layout", trace_idle_s=1.0, anomaly=False)
    try:
        # In a thread of its own: Playwright's sync API holds an event loop on this one, and the stack runs its own.
        with ThreadPoolExecutor(1) as pool:
            summary = pool.submit(run_stack, server.base_url, requests=REQUESTS).result()
        assert summary.requests == REQUESTS and summary.errors == 0, summary
        assert server.query is not None
        query = server.query
        wait_for(
            lambda: query.analysis.trace_summaries(AnalysisFilter(), tenant=ALL_TENANTS).height >= REQUESTS,
            ANALYSED_TIMEOUT_S,
        )
        yield server
    finally:
        server.stop()


def wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    """Poll ``condition`` until it is true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not true within {timeout_s} s")
        time.sleep(0.2)


def open_page(page: Page, base: str, name: str, trace_id: str) -> None:
    """Go to page ``name`` and wait until its content is in."""
    if name == "trace":
        open_trace(page, f"{base}/ui/trace/{trace_id}")
        return
    if name == "conversation":
        # One conversation's page, through the list's first link (the stack's runs name their own sessions).
        page.goto(f"{base}/ui/conversations")
        page.click("#conversations-list .hs-conversation-row a")
    else:
        page.goto(f"{base}/ui/{'' if name == 'search' else name}")
    page.wait_for_selector(READY[name], timeout=TIMEOUT_MS)
    if name == "topology":
        page.wait_for_function("() => document.querySelector('#topology-graph canvas') !== null", timeout=TIMEOUT_MS)
    # A page's other figures fill in by the same callback or soon after; wait for Plotly to have drawn them.
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')].every(plot => plot.querySelector('.main-svg'))",
        timeout=TIMEOUT_MS,
    )


def test_every_page_keeps_its_content_in_its_cards_at_1280_and_1920_px(
    browser: Browser, stack_server: RunningServer
) -> None:
    base = stack_server.base_url
    assert stack_server.query is not None
    summaries = stack_server.query.analysis.trace_summaries(AnalysisFilter(), tenant=ALL_TENANTS)
    trace_id = summaries["trace_id"][0]
    problems: dict[str, list[str]] = {}
    for width in WIDTHS:
        page, errors = new_page(browser, height=1000)
        page.set_viewport_size({"width": width, "height": 1000})
        for name in ("search", "trace", *list(READY)[1:]):
            open_page(page, base, name, trace_id)
            found = page.evaluate(OVERFLOW_JS)
            if name == "search":
                # Whichever stage dominates a request, its name is read whole (the run has a few of them).
                cut = page.evaluate(LABEL_CUT_JS, ["dominant_stage", list(STAGE_LABELS.values())])
                found += [f"dominant stage '{label}' cut" for label in cut]
            if found:
                problems[f"{name} at {width} px"] = found
            screenshot(page, f"ui-layout-{name}-{width}.png")
        page.close()
        assert errors == [], (width, errors)
    assert problems == {}
