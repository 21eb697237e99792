"""``/docs`` (Swagger UI) and ``/redoc`` served with their JavaScript and CSS from this process, not a CDN, so
the API description also renders on a machine without internet access.

The assets are the ones the ``fastapi-offline`` package ships (Swagger UI 5, which reads OpenAPI 3.1 as
FastAPI writes it, and ReDoc 2); only its ``static/`` folder is used, under :data:`DOCS_ASSETS`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
DOCS_ASSETS = "/docs/assets"
"""Where ``swagger-ui-bundle.js``, ``swagger-ui.css``, ``redoc.standalone.js`` and ``favicon.png`` are served
(public, like the pages that load them: :data:`hotspan.auth.policy.PUBLIC_PREFIXES`)."""
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))


def install_docs(app: FastAPI) -> None:
    """Add the docs pages and their assets to ``app``, built with ``docs_url=None, redoc_url=None``.

    Paths honour the ASGI ``root_path``, so the pages also work behind a path-rewriting proxy.
    """

    @app.get(DOCS_URL, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} · API",
            oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT_URL}",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} · API",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )

    app.mount(DOCS_ASSETS, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
