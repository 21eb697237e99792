"""``/docs`` and ``/redoc`` load their JavaScript and CSS from this server, never a CDN; and Swagger UI really
renders Hotspan's OpenAPI 3.1 description in a browser with no internet access."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from playwright.sync_api import Browser

from browser_kit import TIMEOUT_MS, new_page, screenshot
from hotspan.docs import DOCS_ASSETS, install_docs
from hotspan.server import RunningServer

ASSET_URL = re.compile(r'(?:src|href)="([^"]+\.(?:js|css|png))"')


def _client() -> TestClient:
    app = FastAPI(title="Demo", docs_url=None, redoc_url=None)
    install_docs(app)
    return TestClient(app)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_their_assets_from_this_server(page: str) -> None:
    client = _client()
    html = client.get(page)
    assert html.status_code == 200
    assert "cdn.jsdelivr.net" not in html.text and "fonts.googleapis.com" not in html.text
    assets = ASSET_URL.findall(html.text)
    assert assets and all(url.startswith(f"{DOCS_ASSETS}/") for url in assets)
    for url in assets:
        answer = client.get(url)
        assert answer.status_code == 200 and len(answer.content) > 100, url


def test_docs_honour_the_root_path() -> None:
    client = TestClient(_client().app, root_path="/hotspan")
    assert f'"/hotspan{DOCS_ASSETS}/swagger-ui-bundle.js"' in client.get("/docs").text


@pytest.mark.ui
def test_swagger_ui_renders_offline(browser: Browser, hotspan_server: RunningServer) -> None:
    page, errors = new_page(browser, height=900)
    outside: list[str] = []
    page.on(
        "request",
        lambda request: None if request.url.startswith(hotspan_server.base_url) else outside.append(request.url),
    )
    page.goto(f"{hotspan_server.base_url}/docs")
    page.wait_for_selector(".swagger-ui .information-container .title", timeout=TIMEOUT_MS)
    assert "Hotspan" in page.inner_text(".swagger-ui .information-container .title")
    assert page.locator(".swagger-ui .opblock").count() > 10
    screenshot(page, "docs.png")
    assert outside == [] and errors == []
