"""Headless Chromium on the Services page of a served Hotspan whose Prometheus (the stand-in) holds two vLLM services'
engine metrics of the last minute: the capacity panel's rows (each service above its engines), scores coloured by
band, a bar per scored part with its input in its unit, and the limiting part in words. Screenshot
``test-artifacts/ui-services-capacity.png``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from capacity_support import WINDOW_S, add_engine
from playwright.sync_api import Browser
from prometheus_standin import PrometheusStandIn

from browser_kit import TIMEOUT_MS, new_page, screenshot
from testkit import serve_in_process

pytestmark = pytest.mark.ui


def test_services_page_shows_capacity_per_service_and_engine(browser: Browser, chdb_dsn: str, tmp_path: Path) -> None:
    # The counters' minute ends a few seconds from now, so the page's window (ending when it loads) holds it.
    start = time.time() - WINDOW_S + 5
    with PrometheusStandIn() as standin:
        llama = {"job": "vllm-llama", "model_name": "llama"}
        add_engine(standin, {**llama, "instance": "a:8000"}, kv=0.94, waiting=1, running=8, requests=60,
                   ttft_counts=(40, 60, 60, 60, 60), start=start)  # fmt: skip
        add_engine(standin, {**llama, "instance": "b:8000"}, kv=0.30, waiting=0, running=6, requests=60,
                   ttft_counts=(50, 60, 60, 60, 60), start=start)  # fmt: skip
        add_engine(standin, {"job": "vllm-qwen", "model_name": "qwen", "instance": "c:8000"}, kv=0.4, waiting=3,
                   running=4, requests=30, ttft_counts=(0, 0, 10, 30, 30), start=start)  # fmt: skip
        server = serve_in_process(
            chdb_dsn, tmp_path, "capui", grpc_port=-1, prometheus_url=standin.url, capacity_window_s=WINDOW_S
        )
        try:
            page, errors = new_page(browser, height=1000)
            page.goto(f"{server.base_url}/ui/services?lookback=15m")
            page.wait_for_selector("#services-capacity .hs-capacity-row", timeout=TIMEOUT_MS)
            rows = page.locator("#services-capacity .hs-capacity-row")
            names = rows.locator(".hs-capacity-name").all_inner_texts()
            assert names == ["vllm-llama", "a:8000/llama", "b:8000/llama", "vllm-qwen", "c:8000/qwen"]
            assert page.locator("#services-capacity .hs-capacity-service").count() == 2

            # Engine a's cache is 94 % full against 95 % saturation: the limit, named in words, an exhausted band.
            full = rows.nth(1)
            assert full.locator(".hs-capacity-limit").inner_text() == "KV cache 94% full"
            assert full.locator("[data-band]").get_attribute("data-band") == "exhausted"
            assert rows.nth(0).locator(".hs-capacity-limit").inner_text() == "KV cache 94% full"  # its service
            assert rows.nth(2).locator("[data-band]").get_attribute("data-band") == "healthy"
            # Three scored parts per row (no sized rate): three bars; the rate is shown, not scored.
            assert full.locator(".hs-capacity-bar").count() == 3
            assert "req/s (not scored)" in full.inner_text()
            # qwen: three waiting beside four running, the TTFT p95 in (1, 2.5] s against the 2 s SLO.
            qwen = rows.nth(3).inner_text()
            assert "3.0 waiting, 4.0 running" in qwen and "(SLO 2.00 s)" in qwen
            screenshot(page, "ui-services-capacity.png")
            assert errors == []
        finally:
            server.stop()
