"""Links from an aggregate row to the traces behind it: a few example traces, slowest first, and the trace search
prefilled with the row's scope and sorted longest first (the full list). Pure builders; ``prefix`` is the app's
URL path prefix (``"/ui"``)."""

from __future__ import annotations

from collections.abc import Sequence

from dash import dcc, html
from dash.development.base_component import Component

from dashboards.query_form import LOOKBACKS, SearchForm, form_to_url
from query.store import short_trace_id


def search_href(
    prefix: str,
    *,
    lookback: str | None = None,
    service: str | None = None,
    operation: str | None = None,
    model: str | None = None,
    tenant: str | None = None,
    stage: str | None = None,
) -> str:
    """The search page prefilled with a scope, longest traces first, or with a ``stage`` (an ``analysis.STAGES``
    name) the traces where that stage took longest (the ``longest_stage`` sort, only traces that spent time in it).
    A model and a request tenant become attribute filters (``gen_ai.request.model``, ``tenant_id``): spans carry
    them as such."""
    attributes = " ".join(
        f'{key}="{value}"' for key, value in (("gen_ai.request.model", model), ("tenant_id", tenant)) if value
    )
    form = SearchForm(
        service=service or None,
        operation=operation or None,
        attributes=attributes or None,
        lookback=lookback if lookback in LOOKBACKS else SearchForm.lookback,
        sort="longest_stage" if stage else "longest",
        stage=stage or None,
    )
    return f"{prefix}/{form_to_url(form)}"


def drilldown(prefix: str, trace_ids: Sequence[str], search: str | None) -> Component:
    """A cell of example trace links (each its short ID, ``storage.ids.short_trace_id``, the whole ID in its title),
    then a link to the prefilled search (none where the search cannot list the rows' traces: ``search`` None)."""
    links: list[Component | str] = [
        dcc.Link(
            short_trace_id(trace_id), href=f"{prefix}/trace/{trace_id}", title=trace_id, className="hs-mono hs-example"
        )
        for trace_id in trace_ids
    ]
    if search is not None:
        links.append(dcc.Link("all, slowest first →", href=search, className="hs-drill"))
    return html.Span(className="hs-drilldown", children=links)


def drill_header() -> Component:
    """The header of a table's column of :func:`drilldown` cells. Its class gives the column a fixed width
    (``assets/hotspan.css``): in a ``table-layout: fixed`` table an unsized column gets an equal share, narrower
    than "all, slowest first →" on a 1280 px screen, and the link ran out of its card."""
    return html.Th("Slowest traces", className="hs-drill-col")
