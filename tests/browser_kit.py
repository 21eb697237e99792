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
