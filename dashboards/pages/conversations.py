"""Conversations page (``/ui/conversations``): the conversations whose turns started in a window (search by ID,
service, minimum duration, sort), and one conversation (``/ui/conversations/<id>``): its totals and slowest turn
(linked to its trace), its turns as a timeline split into stages, its context growth, and a table of its turns with
tokens and cost. Read through the query room's :class:`query.conversations.ConversationService`."""

from __future__ import annotations

from urllib.parse import unquote

import flask
from dash import Dash, Input, Output, dcc, get_relative_path, html
from dash.development.base_component import Component

from dashboards.controls import (
    choice_field,
    field,
    page_url,
    section,
    text_input,
    url_output,
    window_filter,
    window_inputs,
    window_page,
)
from dashboards.conversation_panels import (
    context_growth_figure,
    conversation_facts,
    conversation_href,
    conversation_table,
    turn_table,
    turns_timeline_figure,
)
from dashboards.pages import Page, query_room
from dashboards.tenancy import read_tenant
from query.conversations import ConversationSort
from query.service import QueryService
from query.store import ConversationFilter, StorageError
from units.durations import DurationError, parse_duration_param

LISTED = 200
"""Most conversations listed."""
SCOPE = ("service",)
"""The scope the list takes: a turn's root service."""
SORTS: dict[ConversationSort, str] = {
    "last_seen": "Latest turn",
    "first_seen": "First turn",
    "duration": "Longest",
    "turns": "Most turns",
    "input_tokens": "Most input tokens",
    "cost": "Most costly",
}
_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}


def layout(conversation_id: str | None = None, **query: str) -> Component:
    """One conversation when the path names it (``conversation_id`` still percent-encoded, as Dash passes path
    variables), else the list of the URL's window and filters: either read here, so the page paints in one round
    trip (Dash renders a page's layout in a request of its own); the list's callback answers later changes."""
    reading = flask.has_request_context()
    if conversation_id is not None and reading:
        return _conversation(unquote(conversation_id))
    sort = query.get("sort") if query.get("sort") in SORTS else "last_seen"
    fields = [
        field("Conversation ID", text_input("conversations-q", query.get("q") or None, "contains…")),
        field("Min duration", text_input("conversations-min", query.get("min") or None, "e.g. 2s")),
        field("Min cost", text_input("conversations-cost", query.get("cost") or None, "e.g. 0.01")),
        choice_field("Sort", "conversations-sort", SORTS, sort),
    ]
    listed, message = (
        _listing(query.get("lookback"), query.get("service"), query.get("q"), query.get("min"), query.get("cost"), sort)
        if reading
        else (html.Div(), "")
    )
    notice = [html.P(message, className="hs-message", role="alert")] if message else []
    return window_page(
        "conversations",
        section(
            "Conversations",
            "requests tied by the conversation their spans name, with a turn started in the window",
            dcc.Loading(html.Div(id="conversations-list", children=[*notice, listed]), type="dot"),
        ),
        fields=fields,
        query=query,
        scopes=SCOPE,
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Answer a change of the window or the filters with the list (the layout drew the URL's)."""

    @app.callback(
        Output("conversations-list", "children"),
        Output("conversations-message", "children"),
        url_output("conversations"),
        *window_inputs("conversations", *SCOPE),
        Input("conversations-q", "value"),
        Input("conversations-min", "value"),
        Input("conversations-cost", "value"),
        Input("conversations-sort", "value"),
        prevent_initial_call=True,
    )
    def load(
        lookback: str | None,
        service: str | None,
        _clicks: int | None,
        search: str | None,
        min_duration: str | None,
        min_cost: str | None,
        sort: str | None,
    ) -> tuple[Component, str, str]:
        texts = (service, search, min_duration, min_cost)
        service, search, min_duration, min_cost = ((text or "").strip() or None for text in texts)
        listed, message = _listing(lookback, service, search, min_duration, min_cost, sort)
        url = page_url(lookback, service=service, q=search, min=min_duration, cost=min_cost, sort=sort)
        return listed, message, url


def _listing(
    lookback: str | None,
    service: str | None,
    search: str | None,
    min_duration: str | None,
    min_cost: str | None,
    sort: str | None,
) -> tuple[Component, str]:
    """The conversations a window and the filters choose, for the caller's tenant (call in a request), and the
    message line (empty, or why there is no list)."""
    room, tenant = query_room(), read_tenant()
    order: ConversationSort = next((key for key in SORTS if key == sort), "last_seen")
    try:
        window, _step_s = window_filter(room, lookback, tenant)
        where = ConversationFilter(
            start_ns=window.start_ns,
            end_ns=window.end_ns,
            search=(search or "").strip() or None,
            service=(service or "").strip() or None,
            min_duration_ns=parse_duration_param((min_duration or "").strip() or None),
        )
        cost = float(min_cost) if (min_cost or "").strip() else None
        rows = room.conversations.conversations(where, order, LISTED, tenant=tenant, min_cost=cost)
    except DurationError as exc:
        return html.Div(), f"Min duration: {exc}"
    except (StorageError, ValueError) as exc:
        return html.Div(), str(exc)
    prefix = get_relative_path("/").rstrip("/")
    return conversation_table(rows, room.conversations.currency, lambda c: conversation_href(prefix, c)), ""


def _conversation(conversation_id: str) -> Component:
    """The page of one conversation, or a notice saying why there is none."""
    prefix = get_relative_path("/").rstrip("/")
    back = dcc.Link("← all conversations", href=f"{prefix}/conversations", className="hs-drill")
    try:
        found = query_room().conversations.conversation(conversation_id, tenant=read_tenant())
    except (StorageError, ValueError) as exc:
        return _page(back, html.P(f"Cannot show this conversation: {exc}", className="hs-message", role="alert"))
    if found is None:
        missing = f"Conversation {conversation_id} not found: no analysed request names it (yet)."
        return _page(back, html.P(missing, className="hs-hint", id="conversations-missing"))
    return _page(
        back,
        section("Conversation", "its turns (requests) and what they cost", conversation_facts(found, prefix)),
        section(
            "Turns",
            "each turn at its start, split into stages along its critical path",
            dcc.Graph(id="conversations-timeline", figure=turns_timeline_figure(found.turns), config=_GRAPH_CONFIG),
        ),
        section(
            "Context growth",
            "input tokens per turn: what the model re-reads grows with the conversation",
            dcc.Graph(id="conversations-growth", figure=context_growth_figure(found.turns), config=_GRAPH_CONFIG),
        ),
        section("Turn by turn", "open a turn's trace from its ID", turn_table(found, prefix)),
    )


def _page(*children: Component) -> Component:
    return html.Div(className="hs-page hs-conversations hs-conversation", children=list(children))


def title(conversation_id: str | None = None) -> str:
    """Browser tab title."""
    return f"Conversation {unquote(conversation_id)} · Hotspan" if conversation_id else "Conversations · Hotspan"


PAGE = Page(
    module=__name__,
    path="/conversations",
    path_template="/conversations/<conversation_id>",
    name="Conversations",
    layout=layout,
    register_callbacks=register_callbacks,
    title=title,
)
