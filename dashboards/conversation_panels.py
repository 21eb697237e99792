"""The Conversations page's builders: the list of conversations, and one conversation's facts, turns timeline (each
turn a bar at its start, split into its stages), context growth (input tokens per turn) and turn table. Pure
functions of the query room's frames (:mod:`query.conversations`); ``prefix`` is the app's URL path prefix
(``"/ui"``). Times are ns since the Unix epoch, durations ns, unless a name says ms."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import plotly.graph_objects as go
import polars as pl
from dash import dcc, html
from dash.development.base_component import Component

from analysis import STAGES
from dashboards.colors import STAGE_COLORS, stage_label
from dashboards.figures import TEMPLATE, empty_figure
from dashboards.format import format_duration_ns, format_time_ns, format_tokens
from query.conversations import Conversation
from query.store import short_trace_id
from units import NS_PER_MS

NO_CONVERSATION = (
    "No conversation in this window. A request is a turn of a conversation when its spans name one"
    " (gen_ai.conversation.id, session.id or langfuse.session.id), once the pipeline has analysed it."
)
_NUMBER = {"textAlign": "right"}


def conversation_href(prefix: str, conversation_id: str) -> str:
    """The conversation's page (its ID percent-encoded as one path segment)."""
    return f"{prefix}/conversations/{quote(conversation_id, safe='')}"


def format_cost(cost: float | None, currency: str) -> str:
    """A cost with its currency, 4 decimals (``"0.0123 USD"``); ``"—"`` without a price."""
    return "—" if cost is None else f"{cost:.4f} {currency}"


def conversation_table(rows: pl.DataFrame, currency: str, href: Callable[[str], str]) -> Component:
    """One row per conversation (:meth:`query.conversations.ConversationService.conversations` columns): its ID
    linking to ``href(id)``, service, turns, first and latest turn (UTC), summed turn durations, tokens and cost."""
    if not rows.height:
        return html.P(NO_CONVERSATION, className="hs-hint")
    numbers = ("Turns", "Duration", "Input", "Output", "Cached", "Cost")
    header = html.Tr(
        [html.Th(name) for name in ("Conversation", "Service", "First turn (UTC)", "Latest turn (UTC)")]
        + [html.Th(name, style=_NUMBER) for name in numbers]
    )
    body = [
        html.Tr(
            className="hs-conversation-row",
            children=[
                html.Td(dcc.Link(row["conversation_id"], href=href(row["conversation_id"]), className="hs-mono")),
                html.Td(row["service"]),
                html.Td(format_time_ns(row["first_start_ns"], zone=False)),
                html.Td(format_time_ns(row["last_start_ns"], zone=False)),
                html.Td(f"{row['turns']:,}", style=_NUMBER),
                html.Td(format_duration_ns(row["duration_ns"]), style=_NUMBER),
                html.Td(f"{row['input_tokens']:,}", style=_NUMBER),
                html.Td(f"{row['output_tokens']:,}", style=_NUMBER),
                html.Td(f"{row['cached_input_tokens']:,}", style=_NUMBER),
                html.Td(format_cost(row["cost"], currency), style=_NUMBER),
            ],
        )
        for row in rows.iter_rows(named=True)
    ]
    return html.Table(
        className="hs-kv hs-analysis-table hs-conversations-table", children=[html.Thead(header), html.Tbody(body)]
    )


def conversation_facts(conversation: Conversation, prefix: str) -> Component:
    """The conversation's totals and its slowest turn, linked to that turn's trace page."""
    turns = conversation.turns
    slowest_id = conversation.slowest_trace_id
    slowest = turns.filter(pl.col("trace_id") == slowest_id).row(0, named=True)
    slowest_text = f"turn {turn_number(turns, slowest_id)} · {format_duration_ns(slowest['duration_ns'])}"
    facts: list[tuple[str, str | Component]] = [
        ("Conversation", conversation.conversation_id),
        ("Turns", f"{turns.height:,}" + (" (the earliest; more stored)" if conversation.truncated else "")),
        ("Waited", format_duration_ns(int(turns["duration_ns"].sum()))),
        ("Input", format_tokens(int(turns["input_tokens"].sum()))),
        ("Output", format_tokens(int(turns["output_tokens"].sum()))),
        ("Cached input", format_tokens(int(turns["cached_input_tokens"].sum()))),
        ("Cost", format_cost(conversation.cost, conversation.currency)),
        (
            "Slowest turn",
            dcc.Link(
                f"{slowest_text} · {short_trace_id(slowest_id)}",
                href=f"{prefix}/trace/{slowest_id}",
                id="conversations-slowest",
                title=slowest_id,
            ),
        ),
    ]
    return html.Dl(
        className="hs-facts",
        children=[html.Div(className="hs-fact", children=[html.Dt(label), html.Dd(value)]) for label, value in facts],
    )


def turn_number(turns: pl.DataFrame, trace_id: str) -> int:
    """The 1-based position of turn ``trace_id`` in ``turns`` (time order)."""
    return turns["trace_id"].to_list().index(trace_id) + 1


def turns_timeline_figure(turns: pl.DataFrame) -> go.Figure:
    """Each turn a horizontal bar at its start (ms after the first turn's), as long as its duration, split into its
    stages in :data:`analysis.STAGES` order (critical-path ns, which sum to the duration): where each turn's time
    went, and the gaps where the user was typing. The first turn on top."""
    if not turns.height:
        return empty_figure("No turn")
    first = int(turns["start_ns"].min() or 0)
    offset_ms = ((turns["start_ns"] - first) / NS_PER_MS).to_list()
    labels = [f"turn {i + 1}" for i in range(turns.height)]
    figure = go.Figure(layout={"template": TEMPLATE})
    done_ms = [0.0] * turns.height
    for stage in STAGES:
        spent_ms = (turns[f"{stage}_ns"] / NS_PER_MS).to_list()
        if not any(spent_ms):
            continue
        figure.add_bar(
            name=stage_label(stage),
            y=labels,
            x=spent_ms,
            base=[o + d for o, d in zip(offset_ms, done_ms, strict=True)],
            orientation="h",
            marker={"color": STAGE_COLORS[stage]},
            customdata=turns["trace_id"].to_list(),
            hovertemplate=f"{stage_label(stage)}: %{{x:,.1f}} ms<br>%{{customdata}}<extra>%{{y}}</extra>",
        )
        done_ms = [d + s for d, s in zip(done_ms, spent_ms, strict=True)]
    figure.update_layout(
        barmode="overlay",
        height=120 + 28 * turns.height,
        margin={"l": 10, "r": 10, "t": 30, "b": 30},
        xaxis={"title": "ms after the first turn started"},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
    )
    return figure


def context_growth_figure(turns: pl.DataFrame) -> go.Figure:
    """Input tokens per turn (cached part apart), and output tokens: how the context the model re-reads grows."""
    if not turns.height:
        return empty_figure("No turn")
    labels = [f"turn {i + 1}" for i in range(turns.height)]
    uncached = (turns["input_tokens"] - turns["cached_input_tokens"]).to_list()
    figure = go.Figure(layout={"template": TEMPLATE})
    figure.add_bar(
        name="input, cached", x=labels, y=turns["cached_input_tokens"].to_list(), marker={"color": "#9fa7b8"}
    )
    figure.add_bar(name="input, uncached", x=labels, y=uncached, marker={"color": "#2f4fbf"})
    figure.add_scatter(name="output", x=labels, y=turns["output_tokens"].to_list(), mode="lines+markers")
    figure.update_layout(
        barmode="stack",
        height=260,
        margin={"l": 10, "r": 10, "t": 30, "b": 30},
        yaxis={"title": "tokens"},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
    )
    return figure


def turn_table(conversation: Conversation, prefix: str) -> Component:
    """One row per turn in time order: its trace (linked), start (UTC), duration, dominant stage, tokens in, the
    growth over the previous turn, out and cached, and cost; the slowest turn marked."""
    currency = conversation.currency
    numbers = ("Duration", "Input", "Growth", "Output", "Cached", "Cost")
    header = html.Tr(
        [html.Th(name) for name in ("Turn", "Trace", "Started (UTC)", "Most time in")]
        + [html.Th(name, style=_NUMBER) for name in numbers]
    )
    body = []
    for index, row in enumerate(conversation.turns.iter_rows(named=True)):
        dominant = max(STAGES, key=lambda stage: row[f"{stage}_ns"])
        growth = row["context_growth_tokens"]
        slowest = row["trace_id"] == conversation.slowest_trace_id
        body.append(
            html.Tr(
                className="hs-turn-row" + (" hs-turn-slowest" if slowest else ""),
                children=[
                    html.Td(f"{index + 1}" + (" · slowest" if slowest else "")),
                    html.Td(
                        dcc.Link(
                            short_trace_id(row["trace_id"]),
                            href=f"{prefix}/trace/{row['trace_id']}",
                            title=row["trace_id"],
                            className="hs-mono",
                        )
                    ),
                    html.Td(format_time_ns(row["start_ns"], zone=False)),
                    html.Td(stage_label(dominant) if row[f"{dominant}_ns"] else "—"),
                    html.Td(format_duration_ns(row["duration_ns"]), style=_NUMBER),
                    html.Td(f"{row['input_tokens']:,}", style=_NUMBER),
                    html.Td("—" if growth is None else f"{growth:+,}", style=_NUMBER),
                    html.Td(f"{row['output_tokens']:,}", style=_NUMBER),
                    html.Td(f"{row['cached_input_tokens']:,}", style=_NUMBER),
                    html.Td(format_cost(row["cost"], currency), style=_NUMBER),
                ],
            )
        )
    return html.Table(className="hs-kv hs-analysis-table hs-turns", children=[html.Thead(header), html.Tbody(body)])
