"""Grafana Tempo's HTTP API (grafana/tempo ``pkg/api/http.go`` paths and parameters), mounted under ``/tempo``.

Every read runs on the read pool with the caller's tenant, through the query room: a trace by ID is
:meth:`query.service.QueryService.trace_page` (at most ``limits.max_spans`` spans, as the Jaeger routes), a search
:meth:`~query.service.QueryService.span_sets`, tag names and values
:meth:`~query.service.QueryService.tag_names` and :meth:`~query.service.QueryService.tag_values`. Errors are plain
text (:mod:`api.tempo.errors`).
"""

from __future__ import annotations

import time
import urllib.parse
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel

from api.errors import ApiError
from api.jaeger import otlp
from api.jaeger.paths import ANY_PATH
from api.read_pool import ReadPool
from api.tempo import proto
from api.tempo import search as search_params
from api.tempo.errors import TempoError, TempoRoute
from api.tenancy import Tenant
from api.trace_limits import TraceReadLimits
from api.traces import parse_trace_id
from query.service import QueryService

PREFIX = "/tempo"
"""Where the API is served: Grafana's Tempo data-source URL is ``http://<hotspan>/tempo``."""
PROTOBUF = "application/protobuf"
TAG_SCOPES = ("span", "resource", "intrinsic")
INTRINSIC_TAGS = ["duration", "kind", "name", "status"]
MAX_TAGS = 1_000
"""Most tag names per scope and values per tag answered (Tempo bounds these answers by size, ``max_bytes``)."""
_NS_PER_S = 1_000_000_000
_DEFAULT_TAG_WINDOW_S = 24 * 3600
"""Tag names and values are read from spans of this window before ``end`` when ``start`` is absent."""
_MAX_TAG_CHARS = 512
"""Longest tag name a tag-values route reads (v1 and v2 alike); a longer one is a 400."""
_NOT_FOUND = "trace not found"


def _text(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _text("Bad parameter or TraceQL outside the subset, named in the text."),
    413: _text("The read would exceed its budget."),
    503: _text("Too many reads at once, or one ran past its time budget; `Retry-After`."),
}
"""Tempo's plain-text failures (:mod:`api.tempo.errors`), documented on every route that reads."""
_TRACE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {}, PROTOBUF: {"schema": {"type": "string", "format": "binary"}}}},
    404: _text("No such trace (`trace not found`)."),
    **_ERRORS,
}


def _hotspan_version() -> str:
    try:
        return version("hotspan")
    except PackageNotFoundError:
        return "dev"


TEMPO_VERSION = f"2.7.0+hotspan.{_hotspan_version()}"
"""What ``/api/status/buildinfo`` answers: the Tempo release whose HTTP API this one follows (Grafana picks the
features it offers by this version), then Hotspan's own."""


class BuildInfo(BaseModel):
    """Prometheus' ``version`` build-info shape, which Tempo answers on ``/api/status/buildinfo``."""

    version: str
    revision: str
    branch: str
    buildUser: str
    buildDate: str
    goVersion: str


def build_router(
    query: QueryService, limits: TraceReadLimits | None = None, reads: ReadPool | None = None
) -> APIRouter:
    """Tempo API routes over the query room ``query``, on ``reads`` (a pool of its own when omitted)."""
    router = APIRouter(prefix=PREFIX, tags=["tempo"], route_class=TempoRoute)
    limits = limits or TraceReadLimits()
    reads = reads or ReadPool()

    @router.get("/api/echo", operation_id="tempo_echo", response_class=PlainTextResponse)
    async def echo() -> str:
        """``echo``: what Grafana's data source calls to test the connection."""
        return "echo"

    @router.get("/api/status/buildinfo", operation_id="tempo_buildinfo", response_model=BuildInfo)
    async def buildinfo() -> BuildInfo:
        """Build information; Grafana reads ``version`` to pick the features it offers."""
        return BuildInfo(
            version=TEMPO_VERSION,
            revision="",
            branch="",
            buildUser="",
            buildDate="",
            goVersion="",
        )

    async def trace(trace_id: str, tenant: str | None) -> tuple[list[dict[str, Any]], dict[str, str] | None]:
        """The OTLP JSON ``resourceSpans`` of a trace and the headers of its answer: a ``Warning`` when it holds
        more than ``limits.max_spans`` spans (the first by start are answered; :mod:`api.trace_limits`)."""
        try:
            canonical = parse_trace_id(trace_id)
        except ApiError as exc:
            raise TempoError(400, f"invalid trace ID: {exc.message}") from None
        page = await reads.run(query.trace_page, canonical, tenant=tenant, limit=limits.max_spans)
        if page.span_count == 0:
            raise TempoError(404, _NOT_FOUND)
        headers = None
        if page.partial:
            limits.count_truncated("tempo")
            headers = {"Warning": f'299 hotspan "{limits.warning(canonical, page.span_count)}"'}
        entries: list[dict[str, Any]] = (await reads.run(otlp.traces_data, page.spans))["resourceSpans"]
        return entries, headers

    @router.get(
        f"/api/traces/{{trace_id:{ANY_PATH}}}",
        operation_id="tempo_trace",
        responses=_TRACE_RESPONSES,
        description='A trace as `{"batches": [OTLP ResourceSpans]}`; `tempopb.Trace` under `Accept: '
        "application/protobuf`. 404 when unknown. `start`/`end` (Unix s) are accepted hints.",
    )
    async def trace_v1(
        trace_id: str,
        tenant: Tenant,
        accept: Annotated[str, Header()] = "",
        start: Annotated[str | None, Query(description="Hint, Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="Hint, Unix seconds.")] = None,
    ) -> Response:
        entries, headers = await trace(trace_id, tenant)
        if PROTOBUF in accept:
            return Response(await reads.run(proto.trace_bytes, entries), media_type=PROTOBUF, headers=headers)
        return JSONResponse({"batches": entries}, headers=headers)

    @router.get(
        f"/api/v2/traces/{{trace_id:{ANY_PATH}}}",
        operation_id="tempo_trace_v2",
        responses=_TRACE_RESPONSES,
        description='A trace as `{"trace": {"resourceSpans": [...]}}`; `tempopb.TraceByIDResponse` under '
        "`Accept: application/protobuf`. 404 when unknown.",
    )
    async def trace_v2(
        trace_id: str,
        tenant: Tenant,
        accept: Annotated[str, Header()] = "",
        start: Annotated[str | None, Query(description="Hint, Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="Hint, Unix seconds.")] = None,
    ) -> Response:
        entries, headers = await trace(trace_id, tenant)
        if PROTOBUF in accept:
            return Response(await reads.run(proto.trace_by_id_response, entries), media_type=PROTOBUF, headers=headers)
        return JSONResponse({"trace": {"resourceSpans": entries}}, headers=headers)

    @router.get(
        "/api/search",
        operation_id="tempo_search",
        responses=_ERRORS,
        description="Traces by TraceQL (`q`, the subset in the README) or logfmt `tags`, newest first.",
    )
    async def search(
        tenant: Tenant,
        q: Annotated[str | None, Query(description="TraceQL.")] = None,
        tags: Annotated[str | None, Query(description='logfmt, `service.name="cart" http.method=GET`.')] = None,
        start: Annotated[str | None, Query(description="Unix seconds, on span start.")] = None,
        end: Annotated[str | None, Query(description="Unix seconds, on span start.")] = None,
        min_duration: Annotated[str | None, Query(alias="minDuration", description="Go duration, trace.")] = None,
        max_duration: Annotated[str | None, Query(alias="maxDuration", description="Go duration, trace.")] = None,
        limit: Annotated[str | None, Query(description=f"Traces, at most {search_params.MAX_LIMIT}.")] = None,
        spss: Annotated[str | None, Query(description="Spans per span set.")] = None,
    ) -> JSONResponse:
        found = search_params.search(q, tags, start, end, min_duration, max_duration, limit, spss)

        def answer() -> dict[str, Any]:
            sets = query.span_sets(
                found.query,
                tenant=tenant,
                min_trace_duration_ns=found.min_trace_ns,
                max_trace_duration_ns=found.max_trace_ns,
                per_trace=found.spans_per_set,
                keys=found.attribute_keys,
            )
            return search_params.response(sets.traces, sets.matched, found.fields)

        return JSONResponse(await reads.run(answer))

    @router.get(
        "/api/search/tags",
        operation_id="tempo_search_tags_v1",
        responses=_ERRORS,
        description=f'Tag names, unscoped (Tempo\'s v1, which Grafana falls back to): `{{"tagNames": [...]}}`, the '
        f"span and resource attribute names together, at most {MAX_TAGS} of each.",
    )
    async def search_tags_v1(
        tenant: Tenant,
        start: Annotated[str | None, Query(description="Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="Unix seconds.")] = None,
    ) -> JSONResponse:
        start_ns, end_ns = _window(start, end)
        names = {"service.name"}
        for scope in ("span", "resource"):
            names.update(await reads.run(query.tag_names, scope, start_ns, end_ns, tenant=tenant, limit=MAX_TAGS))
        return JSONResponse({"tagNames": sorted(names)})

    @router.get(
        f"/api/search/tag/{{tag:{ANY_PATH}}}/values",
        operation_id="tempo_search_tag_values_v1",
        responses=_ERRORS,
        description=f"Values of an unscoped tag (Tempo's v1): `{{\"tagValues\": [...]}}`, strings, the tag's values as "
        f"a span or a resource attribute together, at most {MAX_TAGS} of each.",
    )
    async def search_tag_values_v1(
        tag: str,
        tenant: Tenant,
        start: Annotated[str | None, Query(description="Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="Unix seconds.")] = None,
    ) -> JSONResponse:
        tag = _unescaped(tag)
        if not tag or len(tag) > _MAX_TAG_CHARS:
            raise TempoError(400, f"invalid tag: {tag[:64]!r}")
        start_ns, end_ns = _window(start, end)
        values: set[str] = set()
        for scope in ("span", "resource"):
            found = await reads.run(query.tag_values, scope, tag, start_ns, end_ns, tenant=tenant, limit=MAX_TAGS)
            values.update(found)
        return JSONResponse({"tagValues": sorted(values)})

    @router.get(
        "/api/v2/search/tags",
        operation_id="tempo_search_tags",
        responses=_ERRORS,
        description=f'Tag names by scope: `{{"scopes": [{{"name", "tags"}}]}}`, at most {MAX_TAGS} a scope.',
    )
    async def search_tags(
        tenant: Tenant,
        scope: Annotated[str | None, Query(description="span, resource or intrinsic; all when absent.")] = None,
        start: Annotated[str | None, Query(description="Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="Unix seconds.")] = None,
        limit: Annotated[
            str | None, Query(description=f"Tag names of the span and resource scopes, at most {MAX_TAGS} each.")
        ] = None,
    ) -> JSONResponse:
        if scope not in (None, "", "all", *TAG_SCOPES):
            raise TempoError(400, f"invalid scope: {scope[:64]!r}; one of {', '.join(TAG_SCOPES)}")
        start_ns, end_ns = _window(start, end)
        most = _tag_limit(limit)
        scopes = []
        for name in TAG_SCOPES:
            if scope in (None, "", "all", name):
                names = (
                    INTRINSIC_TAGS
                    if name == "intrinsic"
                    else await reads.run(query.tag_names, name, start_ns, end_ns, tenant=tenant, limit=most)
                )
                if name == "resource" and "service.name" not in names:  # the service column, always there
                    names = sorted([*names[: most - 1], "service.name"])
                scopes.append({"name": name, "tags": names})
        return JSONResponse({"scopes": scopes})

    @router.get(
        f"/api/v2/search/tag/{{tag:{ANY_PATH}}}/values",
        operation_id="tempo_search_tag_values",
        responses=_ERRORS,
        description=f"Values of a scoped tag (`resource.service.name`, `span.http.method`, `name`, `status`, "
        f'`kind`): `{{"tagValues": [{{"type", "value"}}]}}`, at most {MAX_TAGS}.',
    )
    async def search_tag_values(
        tag: str,
        tenant: Tenant,
        start: Annotated[str | None, Query(description="Unix seconds.")] = None,
        end: Annotated[str | None, Query(description="Unix seconds.")] = None,
        q: Annotated[str | None, Query(description="Accepted; values are not narrowed by it.")] = None,
        limit: Annotated[str | None, Query(description=f"Values, at most {MAX_TAGS}.")] = None,
    ) -> JSONResponse:
        scope, name = _scoped(_unescaped(tag))
        start_ns, end_ns = _window(start, end)
        most = _tag_limit(limit)
        values = await reads.run(query.tag_values, scope, name, start_ns, end_ns, tenant=tenant, limit=most)
        kind = "keyword" if scope == "intrinsic" and name in ("status", "kind") else "string"
        return JSONResponse({"tagValues": [{"type": kind, "value": value} for value in values]})

    return router


def _tag_limit(limit: str | None) -> int:
    """Tag names a scope or values answered: Tempo's ``limit`` parameter (Grafana sends its ``tagLimit``, 5,000 by
    default), at most :data:`MAX_TAGS`."""
    return min(search_params.positive(limit, "limit") or MAX_TAGS, MAX_TAGS)


def _unescaped(tag: str) -> str:
    """The tag name of a tag-values path segment already decoded once: decoded once more (``+`` a space), as Tempo's
    ``parseSearchTagValuesRequest`` (``pkg/api/http.go``, ``url.QueryUnescape``) does. Grafana's data source encodes
    the name twice (``language_provider.ts`` ``encodeTag``) and its proxy forwards the browser's path as is, so
    ``span.guid:x-request-id`` arrives as ``span.guid%253Ax-request-id``; a name encoded once is unchanged by this."""
    return urllib.parse.unquote_plus(tag)


def _scoped(tag: str) -> tuple[str, str]:
    """``(scope, name)`` of ``resource.x``, ``span.x`` or an intrinsic; an unscoped ``.x`` or ``x`` reads span
    attributes."""
    if tag in INTRINSIC_TAGS and tag != "duration":
        return "intrinsic", tag
    scope, dot, name = tag.partition(".")
    if dot and scope in ("span", "resource") and name:
        return scope, name
    if tag.startswith(".") and len(tag) > 1:
        return "span", tag[1:]
    if not tag or tag == "duration" or len(tag) > _MAX_TAG_CHARS:
        raise TempoError(400, f"invalid tag: {tag[:64]!r}")
    return "span", tag


def _window(start: str | None, end: str | None) -> tuple[int, int]:
    """``[start_ns, end_ns]`` of Unix-second bounds: a day before ``end`` when ``start`` is absent, up to now (the
    hour after it) when ``end`` is."""
    start_ns, end_ns = search_params.window_ns(start, end)
    end_ns = end_ns if end_ns is not None else time.time_ns() + 3600 * _NS_PER_S
    start_ns = start_ns if start_ns is not None else end_ns - _DEFAULT_TAG_WINDOW_S * _NS_PER_S
    return start_ns, end_ns
