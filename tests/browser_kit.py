"""Headless Chromium for the UI tests: Debian's ``chromium`` driven by Playwright.

The ``browser`` fixture lives in ``tests/conftest.py``; pages and screenshots come from here.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, ConsoleMessage, Page

from testkit import REPO

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these Chromium keeps dialling Google's hosts, which this machine's closed network refuses.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "test-artifacts"
"""Screenshots the UI tests leave for a person to look at (git-ignored)."""
TIMEOUT_MS = 20_000


def new_page(browser: Browser, *, height: int = 1100) -> tuple[Page, list[str]]:
    """A fresh 1500 px wide page and the list its console errors and uncaught exceptions are collected into."""
    page = browser.new_page(viewport={"width": 1500, "height": height})
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors


def screenshot(page: Page, name: str) -> None:
    """Save the whole page as ``test-artifacts/<name>``."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def wait_for_count(page: Page, selector: str, count: int) -> None:
    """Wait until ``selector`` matches exactly ``count`` elements: a search's grid draws its rows after the count
    above it (the same answer sets its columns, ``dashboards.pages.search.result_columns``)."""
    page.wait_for_function(
        "([selector, count]) => document.querySelectorAll(selector).length === count",
        arg=[selector, count],
        timeout=TIMEOUT_MS,
    )


TIMELINE_ROWS_JS = "() => document.getElementById('trace-timeline').hsTimeline.visibleRows()"
"""The timeline rows in view (``assets/trace_timeline.js`` ``visibleRows``): position, span, name, depth, count,
flags, hidden and y (px from the top of the rows canvas)."""


def open_trace(page: Page, url: str) -> None:
    """Go to a trace page and wait until its timeline has drawn its first rows and the details loaded after the
    first paint (the request facts above the timeline; the flame graph below it, which loads when scrolled near)
    are in, then scroll back to the top: the page has settled, so a row stays where the test reads it."""
    page.goto(url)
    page.wait_for_selector("#trace-timeline[data-ready='1']", timeout=TIMEOUT_MS)
    page.wait_for_function("() => Number(document.getElementById('trace-timeline').dataset.drawn) > 0")
    page.locator("#trace-flame-box").scroll_into_view_if_needed()
    page.wait_for_function(
        "() => !document.getElementById('trace-flame-box').innerText.includes('Loading')", timeout=TIMEOUT_MS
    )
    page.wait_for_selector("#trace-request-facts > *", state="attached", timeout=TIMEOUT_MS)
    page.evaluate("() => window.scrollTo(0, 0)")


def timeline_total(page: Page) -> int:
    """Rows the timeline can show now (collapsed and aggregated rows excluded)."""
    return int(page.get_attribute("#trace-timeline", "data-total") or 0)


def wait_total(page: Page, condition: str) -> None:
    """Wait until the timeline's row count ``total`` meets ``condition`` (a JS expression over ``total``)."""
    total = "Number(document.getElementById('trace-timeline').dataset.total)"
    page.wait_for_function(f"() => {{ const total = {total}; return {condition}; }}", timeout=TIMEOUT_MS)


def timeline_row(page: Page, position: int) -> dict:
    """The row in view at ``position``."""
    return next(row for row in page.evaluate(TIMELINE_ROWS_JS) if row["position"] == position)


def click_timeline(page: Page, position: int, *, x: float | None = None, toggle: bool = False) -> None:
    """Click the row at ``position``: on its ▸/▾ when ``toggle``, else at ``x`` px (default: in its bar area)."""
    row = timeline_row(page, position)
    box = page.locator("#trace-canvas").bounding_box()
    assert box is not None
    if toggle:
        x = min(row["depth"], 28) * 12 + 8
    page.mouse.click(box["x"] + (x if x is not None else box["width"] * 0.6), box["y"] + row["y"])
