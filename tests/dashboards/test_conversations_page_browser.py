"""Headless Chromium on the Conversations pages of a served Hotspan: a three-turn conversation of a real
instrumentation library (the OpenAI SDK with OpenInference's instrumentation, ``using_session`` naming it:
``session.id``) run live against the vLLM emulator, its spans exported to the server over OTLP/HTTP. The list shows
it; its page draws the turns as a timeline split into stages, the context growth and the turn table, and links the
slowest turn to its trace page, whose header links back. Each page's load (navigation start to its content in the
DOM, as the page's own clock marks it) is printed; screenshots go to ``test-artifacts/``."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from browser_kit import TIMEOUT_MS, new_page, open_trace, screenshot
from hotspan.server import RunningServer
from instrumented_stack.realclients.common import AppSettings
from instrumented_stack.realclients.harness import run_driver

pytestmark = pytest.mark.ui

DRIVER = "openinference_openai"
CONVERSATION = f"realclient-{DRIVER}-conversation"
TURNS = 3

SHOWN_WATCH = """selector => new MutationObserver((records, observer) => {
    if (!document.querySelector(selector)) return;
    observer.disconnect();
    performance.mark("content-shown");
}).observe(document, {subtree: true, childList: true})"""
"""Run in the page before its scripts: marks (User Timing) when ``selector`` first matches."""
SHOWN_MS_JS = "() => performance.getEntriesByName('content-shown')[0]?.startTime ?? null"
"""ms from the navigation's start to that mark (null until it is set)."""
BAR_TRACES_JS = "id => document.querySelector(`#${id} .js-plotly-plot`).data.map(t => [t.type, t.y ?? t.x])"


def load_ms(page: Page, url: str, selector: str) -> float:
    """Navigate to ``url`` and wait for ``selector``; the ms from navigation start until it first matched."""
    page.add_init_script(f"({SHOWN_WATCH})({selector!r})")
    page.goto(url)
    page.wait_for_selector(selector, timeout=TIMEOUT_MS)
    page.wait_for_function(SHOWN_MS_JS, timeout=TIMEOUT_MS)
    return float(page.evaluate(SHOWN_MS_JS))


@pytest.fixture
def served(hotspan_server: RunningServer, tmp_path: Path) -> str:
    """Base URL of the server once the driver's conversation is stored and analysed."""
    run_driver(
        DRIVER,
        hotspan_server.base_url,
        tmp_path / "truth.json",
        engine_spans=False,
        requests=TURNS,
        app=AppSettings(conversation=True),
    )
    assert hotspan_server.pipeline.flush()
    assert hotspan_server.trace_pipeline is not None
    # Forced: the driver has exited, its traces are whole; no need to wait trace_idle_s (turns the pipeline analysed
    # on its own meanwhile are analysed again if spans arrived since).
    hotspan_server.trace_pipeline.run_once(force=True)
    return hotspan_server.base_url


def test_conversations_list_and_page_in_a_browser(browser: Browser, served: str) -> None:
    page, errors = new_page(browser, height=1400)
    listed_ms = load_ms(page, f"{served}/ui/conversations?lookback=all", ".hs-conversation-row")
    row = page.locator(".hs-conversation-row").filter(has_text=CONVERSATION)
    assert row.count() == 1
    assert row.locator("td").nth(4).inner_text() == str(TURNS)
    screenshot(page, "ui-conversations.png")

    # Searching by ID keeps the search in the URL.
    page.fill("#conversations-q", "OPENINFERENCE")
    page.press("#conversations-q", "Enter")
    page.wait_for_url("**/ui/conversations?*q=OPENINFERENCE*", timeout=TIMEOUT_MS)
    page.fill("#conversations-q", "no-such-conversation")
    page.press("#conversations-q", "Enter")
    page.wait_for_selector("#conversations-list .hs-hint", timeout=TIMEOUT_MS)

    page, errors_detail = new_page(browser, height=1400)
    shown_ms = load_ms(page, f"{served}/ui/conversations/{CONVERSATION}", ".hs-turns .hs-turn-row")
    assert page.locator(".hs-turns .hs-turn-row").count() == TURNS
    assert page.locator(".hs-turns .hs-turn-slowest").count() == 1
    page.wait_for_selector("#conversations-timeline .bars path", timeout=TIMEOUT_MS)
    bars = page.evaluate(BAR_TRACES_JS, "conversations-timeline")
    # One bar per turn in each stage the turns spent time in: the model calls and the tools at least.
    assert len(bars) >= 2 and all(kind == "bar" and len(turns) == TURNS for kind, turns in bars)
    growth = page.evaluate(BAR_TRACES_JS, "conversations-growth")
    assert [kind for kind, _ in growth] == ["bar", "bar", "scatter"]
    screenshot(page, "ui-conversation.png")
    print(f"conversations list shown in {listed_ms:.0f} ms, conversation page in {shown_ms:.0f} ms")

    # The slowest turn opens its trace page, which names the conversation and links back.
    href = page.get_attribute("#conversations-slowest", "href")
    assert href is not None and href.startswith("/ui/trace/")
    open_trace(page, f"{served}{href}")
    page.wait_for_selector("#trace-conversation", timeout=TIMEOUT_MS)
    assert page.inner_text("#trace-conversation") == CONVERSATION
    page.click("#trace-conversation")
    page.wait_for_selector(".hs-turns .hs-turn-row", timeout=TIMEOUT_MS)
    assert errors == [] and errors_detail == []
