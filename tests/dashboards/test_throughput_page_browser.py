"""Headless Chromium on the Throughput page of a served Hotspan holding the engine runs of ``llm_request_spans``:
the scatter with a labelled marker per configuration and the frontier line, the table frontier first, a point's
example trace opening its trace page, and the objectives kept in the URL. Screenshot in ``test-artifacts/``."""

from __future__ import annotations

import pytest
from llm_request_spans import store_runs
from playwright.sync_api import Browser

from browser_kit import TIMEOUT_MS, new_page, screenshot
from hotspan.server import RunningServer

pytestmark = pytest.mark.ui

SCATTER_JS = """
() => document.querySelector('#throughput-scatter .js-plotly-plot').data.map(t => [t.name, t.x.length])
"""
"""``[name, points]`` of every trace the scatter draws."""


def test_throughput_page_draws_configurations_and_the_frontier(browser: Browser, hotspan_server: RunningServer) -> None:
    store_runs(hotspan_server)
    page, errors = new_page(browser, height=1200)
    page.goto(f"{hotspan_server.base_url}/ui/throughput?lookback=all&bucket=window&latency=e2e_p95_ms")
    page.wait_for_selector("#throughput-table .hs-throughput-row", timeout=TIMEOUT_MS)
    page.wait_for_function("() => document.querySelectorAll('#throughput-scatter .scatterlayer .trace').length >= 5")
    drawn = dict(page.evaluate(SCATTER_JS))
    assert drawn.pop("Pareto frontier") == 2
    assert len(drawn) == 4 and all(name.endswith("prefix_caching=true") for name in drawn)
    assert page.locator("#throughput-table .hs-frontier").count() == 2
    labels = page.locator("#throughput-scatter .textpoint text").all_text_contents()
    assert len(labels) == 4 and all("max_num_seqs=" in label for label in labels)  # one point per configuration
    screenshot(page, "ui-throughput.png")

    # Another latency objective goes to the URL; an example trace opens its trace page.
    page.click("#throughput-latency input[value='ttft_p50_ms']")
    page.wait_for_url("**/ui/throughput?*latency=ttft_p50_ms*", timeout=TIMEOUT_MS)
    href = page.locator("#throughput-table .hs-frontier .hs-example").first.get_attribute("href")
    assert href is not None and href.startswith("/ui/trace/")
    page.goto(f"{hotspan_server.base_url}{href}")
    page.wait_for_selector("#trace-timeline[data-ready='1']", timeout=TIMEOUT_MS)
    assert errors == []
