"""What the trace page shows besides its timeline, built from one :class:`~query.trace_model.TraceView`: the header,
the request's model facts, the stage panel, a span's (or an aggregate's) detail, the flame graph, and the meta the
timeline widget (``assets/trace_timeline.js``) starts from. Pure functions of the view, tested without a browser.

Durations arrive in ns and are shown with their unit (:func:`dashboards.format.format_duration_ns`), token
counts with "tokens", shares in %.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import polars as pl
from dash import html
from dash.development.base_component import Component

from analysis import STAGES
from analysis.decomposition import DISAGREEMENT_SHARE
from analysis.messages import SpanMessages, span_messages
from dashboards.colors import NEUTRAL_COLOR, STAGE_COLORS, service_color, stage_label
from dashboards.figures import empty_figure, service_icicle
from dashboards.format import (
    attribute_dict,
    format_attribute,
    format_duration_ns,
    format_share,
    format_time_ns,
    format_tokens,
)
from query.trace_model import TraceView
from query.trace_rows import AGGREGATE_ABOVE, Expansion, lane_window, window

FIRST_WINDOW_ROWS = 64
"""Rows the page sends with its first paint: the timeline shows at most 33 (720 px of 22 px rows,
``assets/trace_timeline.js``), so a view and most of another. Once that paint is done the widget asks for a full
window (its ``FETCH_ROWS``), and for others as the reader scrolls. A smaller start is less for the server to encode
and for Dash to carry in the page's first data: at 1k spans 420 rows were 78 kB of the layout's 103 kB."""
WHOLE_LANE_BINS = 1_000
"""Bins of the whole-trace stage lane in the minimap."""
SLOWEST_MEMBERS = 10
"""Spans listed in an aggregate row's detail."""
_BROKEN_LINKS = {
    "orphan": "its parent is not in the trace",
    "self_parent": "it names itself as parent",
    "cycle": "its parent links loop",
}
"""Why a span is drawn as a root (``analysis.tree.ROOT_REASONS``), in words."""
ADJUSTMENT_NOTES = {
    "wrapped": "analysed under the childless wrapper span beside it, which contains it (analysis.wrappers)",
    "lifted": "a server span that outlives its client span (a streamed response), analysed under the caller's "
    "enclosing span (analysis.remote_spans)",
    "shifted": "a server span moved into its client span against clock skew, as Jaeger's adjuster does "
    "(analysis.remote_spans); times shown are the adjusted ones",
    "streamed": "an LLM call extended to the end of its stream, as the stream's log span reports it, or that log "
    "analysed under its call (analysis.stream_logs); the end shown is the adjusted one",
    "early_action": "an LLM call its caller acted on before the call's span ended: the call ended where that "
    "step began, or the step analysed under the call (analysis.early_actions); times shown are the adjusted ones",
    "spawned": "work that outlives the span that started it (a task not awaited, a stream returned before it was "
    "read, a parent ended early) or that started after its parent returned (an async generator, a server task after "
    "the handler answered): kept whole, the spans above it analysed as ending with it (analysis.spawned_tasks)",
    "extended": "analysed as ending later (a wrapper: as covering more) to hold work below it that outlived it, or a "
    "sibling it adopted (analysis.spawned_tasks, analysis.wrappers); the times shown are the adjusted ones",
    "attached": "a span without a parent in the trace (its parent missing, or a second root) analysed as part of "
    "the request, under the trace's root (analysis.request_window)",
    "enveloped": "the trace's root, analysed as lasting from the trace's first start to its last end because the "
    "real root is missing or never ended (analysis.request_window); the times shown are the adjusted ones",
}
"""What each adjuster did to a span (``analysis.tree.ADJUSTMENTS``), in words, for the span detail."""


def page_meta(view: TraceView, load_id: str, expansion: Expansion | None = None) -> dict[str, object]:
    """What the timeline widget starts from: ``trace_id``, ``load_id`` (new on each page load), ``duration``
    (ns), ``span_count``, ``stored_spans`` (more than ``span_count`` when only the first spans were read),
    ``services`` (``name``, ``color``, indexed by the rows' ``service``), ``stages``
    (``name``, ``label``, ``color``, indexed by stage codes), ``minimap`` (bands: ``start``, ``end`` in ns after
    the trace's start, ``service``), ``lane`` (the whole trace's stage lane), ``expansion`` (the starting one),
    ``aggregatable`` (repeated siblings can be grouped: the trace is larger than
    :data:`query.trace_rows.AGGREGATE_ABOVE`), and ``rows`` (the first window, :data:`FIRST_WINDOW_ROWS` rows,
    :func:`query.trace_rows.window`)."""
    expansion = expansion or Expansion()
    minimap = view.minimap
    return {
        "trace_id": view.trace_id,
        "load_id": load_id,
        "duration": view.duration_ns,
        "span_count": view.size,
        "stored_spans": view.stored_spans,
        "services": [{"name": name, "color": service_color(name)} for name in view.services],
        "stages": [{"name": stage, "label": stage_label(stage), "color": STAGE_COLORS[stage]} for stage in STAGES],
        "minimap": {
            "start": (minimap.start_ns - view.start_ns).tolist(),
            "end": (minimap.end_ns - view.start_ns).tolist(),
            "service": minimap.service.tolist(),
        },
        "lane": lane_window(view, 0, view.duration_ns, WHOLE_LANE_BINS),
        "expansion": {
            "mode": expansion.mode,
            "depth": expansion.depth,
            "toggled": sorted(expansion.toggled),
            "aggregate": expansion.aggregate,
            "opened": sorted(expansion.opened),
            "search": expansion.search,
        },
        "aggregatable": view.size > AGGREGATE_ABOVE,
        "rows": window(view, expansion, 0, FIRST_WINDOW_ROWS),
    }


def header(view: TraceView) -> Component:
    """Root operation, trace ID and the trace's facts, with a warning where the tree needed repairs."""
    root = view.primary_root
    spans = view.spans
    facts = [
        ("Start", format_time_ns(view.start_ns)),
        ("Duration", format_duration_ns(view.duration_ns)),
        ("Spans", f"{view.size:,} of {view.stored_spans:,}" if view.truncated else f"{view.size:,}"),
        ("Services", f"{len(view.services):,}"),
        ("Depth", f"{int(view.depth.max()) + 1:,}"),
        ("Errors", f"{int(view.error.sum()):,}"),
    ]
    children: list[Component] = [
        html.Div(
            className="hs-trace-title",
            children=[
                html.Span(
                    [
                        html.Span(
                            className="hs-swatch", style={"background": service_color(str(spans["service_name"][root]))}
                        ),
                        str(spans["service_name"][root]),
                    ],
                    className="hs-chip",
                ),
                html.H2(str(spans["name"][root])),
                html.Code(view.trace_id, className="hs-trace-id"),
            ],
        ),
        _facts(facts, error_label="Errors" if view.error.any() else None),
    ]
    problems = []
    if view.truncated:
        problems.append(
            f"This trace holds {view.stored_spans:,} spans; the page shows its first {view.size:,} by start time "
            "(HOTSPAN_MAX_TRACE_SPANS bounds what one read holds), so later spans, and the times and stages they "
            "would add, are missing; spans whose parent starts later show as extra roots."
        )
    broken = int((view.root_reason > 1).sum())
    if broken:
        problems.append(
            f"{broken:,} span(s) shown as extra roots: their parent is missing, is the span itself, or is part of "
            "a parent cycle (marked ⚠)."
        )
    if view.duplicates:
        problems.append(f"{view.duplicates:,} repeated span ID(s): the last copy of each is shown.")
    adjusted = int((view.adjustment != 0).sum())
    if adjusted:
        problems.append(
            f"{adjusted:,} span(s) adjusted for the analysis: analysed under another parent, moved against clock "
            "skew, or given the interval of the work they hold (marked ↺; each span's detail says how): the tree "
            "shows the parents the spans name, the numbers come from the adjusted tree."
        )
    problems.extend(view.data_quality)
    if problems:
        children.append(html.Div(" ".join(problems), className="hs-warning"))
    if view.operations is not None:
        children.append(whole_trace_operations(view.operations, view.stored_spans))
    return html.Div(children)


WHOLE_TRACE_ROWS = 20
"""Operations the whole-trace table of a trace read in part lists (the most summed time first)."""


def whole_trace_operations(operations: pl.DataFrame, stored_spans: int) -> Component:
    """The whole trace of a view read in part, by operation (``TraceView.operations``: summed in the store over
    all ``stored_spans``): its :data:`WHOLE_TRACE_ROWS` operations of most summed span time, with their span count,
    summed and longest span time and errors."""
    shown = operations.head(WHOLE_TRACE_ROWS)
    header = html.Tr([html.Th(name) for name in ("Service", "Operation", "Spans", "Summed", "Longest", "Errors")])
    rows = [
        html.Tr(
            [
                html.Td(row["service_name"]),
                html.Td(row["name"]),
                html.Td(f"{row['span_count']:,}"),
                html.Td(format_duration_ns(row["duration_ns_sum"])),
                html.Td(format_duration_ns(row["duration_ns_max"])),
                html.Td(f"{row['error_count']:,}"),
            ]
        )
        for row in shown.iter_rows(named=True)
    ]
    return html.Details(
        [
            html.Summary(
                f"The whole trace by operation: all {stored_spans:,} spans, summed in storage "
                f"({min(operations.height, WHOLE_TRACE_ROWS)} of {operations.height} operations, most time first)"
            ),
            html.Table([html.Thead(header), html.Tbody(rows)], className="hs-analysis-table hs-whole-trace"),
        ],
        open=True,
        id="trace-whole-operations",
    )


def request_facts(view: TraceView) -> Component:
    """The request's model use: LLM calls, model, tokens in and out, time to first token and per output token."""
    summary = view.summary
    calls = int(summary["llm_calls"] or 0)
    if not calls:
        return html.P("No model call in this trace.", className="hs-hint")
    ttft, tpot = summary["ttft_ns"], summary["tpot_ns"]
    facts = [
        ("LLM calls", f"{calls:,}"),
        ("Model", str(summary["model"] or "—")),
        ("Input", format_tokens(summary["input_tokens"])),
        ("Output", format_tokens(summary["output_tokens"])),
        ("Time to first token", format_duration_ns(ttft) if ttft is not None else "—"),
        ("Time per output token", format_duration_ns(tpot) if tpot is not None else "—"),
    ]
    if summary["cached_input_tokens"]:
        facts.insert(4, ("Cached input", format_tokens(summary["cached_input_tokens"])))
    return _facts(facts)


def stage_panel(view: TraceView) -> Component:
    """The dominant stage in words, then one chip per stage with its time and share of the critical paths of
    the trace's roots (the stage lane in the minimap draws the same along the whole trace)."""
    lane = view.lane
    total = int(lane.totals_ns.sum())
    if total <= 0:
        return html.P("No time to break down.", className="hs-hint")
    dominant = lane.dominant or "other"
    share = int(lane.totals_ns[STAGES.index(dominant)]) / total
    roots = int((view.parent < 0).sum())
    scope = "the traced critical path" if roots == 1 else f"the traced critical paths of its {roots:,} roots"
    text = [
        "Most of this trace's time is ",
        html.B(stage_label(dominant), id="trace-dominant-stage"),
        f": {format_share(share)} of {scope} ({format_duration_ns(int(lane.totals_ns[STAGES.index(dominant)]))}).",
    ]
    if lane.waiting_ns > 0:
        text.append(
            f" {format_duration_ns(lane.waiting_ns)} of the trace waits on nothing traced (hatched in the lane)."
        )
    order = np.argsort(-lane.totals_ns, kind="stable")
    chips = [
        html.Span(
            className="hs-stage-chip",
            title=STAGES[stage],
            children=[
                html.Span(className="hs-swatch", style={"background": STAGE_COLORS[STAGES[stage]]}),
                html.Span(stage_label(STAGES[stage]), className="hs-stage-name"),
                html.Span(
                    f"{format_duration_ns(int(lane.totals_ns[stage]))} · {format_share(lane.totals_ns[stage] / total)}",
                    className="hs-hint",
                ),
            ],
        )
        for stage in order
        if lane.totals_ns[stage] > 0
    ]
    bar = html.Div(
        className="hs-stage-bar",
        children=[
            html.Span(
                style={
                    "width": f"{100 * lane.totals_ns[stage] / total:.3f}%",
                    "background": STAGE_COLORS[STAGES[stage]],
                },
                title=f"{stage_label(STAGES[stage])}: {format_share(lane.totals_ns[stage] / total)}",
            )
            for stage in order
            if lane.totals_ns[stage] > 0
        ],
    )
    parts = [html.P(text, className="hs-stage-text"), bar, html.Div(chips, className="hs-stage-legend")]
    note = _stages_page_note(view, total)
    return html.Div([*parts, note] if note is not None else parts)


def _stages_page_note(view: TraceView, lane_ns: int) -> Component | None:
    """Where the Stages page (and the pipeline's summary of this request) attributes the trace differently from
    the lane: work started after the request's window ended (which the request's window leaves out), or several
    roots, make the lane longer than the request. Says both and which to trust for what; None when they agree
    within :data:`analysis.decomposition.DISAGREEMENT_SHARE` of the longer and name the same dominant stage."""
    if view.sections is view.analysis.sections and int((view.parent < 0).sum()) == 1:
        return None  # one root, no span past its parent: the lane is the Stages page's path exactly
    request = view.request_stages_ns
    root_ns = int(request.sum())
    theirs = STAGES[int(np.argmax(request))] if root_ns > 0 else None
    differ = abs(lane_ns - root_ns) > DISAGREEMENT_SHARE * max(lane_ns, root_ns, 1)
    if not differ and theirs == view.lane.dominant:
        return None
    theirs_text = (
        f", mostly {stage_label(theirs)} ({format_share(int(request.max()) / root_ns)})" if theirs is not None else ""
    )
    return html.P(
        id="trace-stages-vs-page",
        className="hs-hint",
        children=(
            f"The Stages page counts this request as its window's {format_duration_ns(view.root_duration_ns)}"
            f"{theirs_text}: Jaeger's critical path over the work started while the request was open (kept whole "
            f"however early the spans above it ended), what the request's caller waited for. The bar above follows "
            f"the critical path of the whole trace ({format_duration_ns(view.duration_ns)}, "
            f"{format_duration_ns(lane_ns)} of it traced), "
            "work started after the request's window ended and other roots included. For where this trace's "
            "work went, trust the bar above; for the request's latency and for comparing requests, the Stages page."
        ),
    )


def span_detail(view: TraceView, span: int) -> Component:
    """A span's detail panel: what it is, where its time went (self/untraced, critical path, stage pieces), its
    model call (model, tokens, first token), its messages, then its attributes (durations and tokens with units),
    events and resource."""
    row = view.spans.row(span, named=True)
    start = int(view.span_start_ns[span])
    duration = int(view.duration[span])
    parent = int(view.parent[span])
    analysis_parent = int(view.analysis.tree.parent[span])
    status = row.get("status_code") or ""
    if row.get("status_message"):
        status = f"{status}: {row['status_message']}"
    fields = [
        ("Service", str(row["service_name"])),
        ("Span ID", str(row["span_id"])),
        ("Parent span ID", str(row["parent_span_id"] or "(none)")),
        ("Kind", str(row.get("kind") or "")),
        ("Status", status),
        ("Start", f"+{format_duration_ns(start - view.start_ns)} ({format_time_ns(start)})"),
        ("Duration", format_duration_ns(duration)),
        (
            "Untraced (own) time",
            f"{format_duration_ns(int(view.self_ns[span]))} · {format_share(_share(view.self_ns[span], duration))}",
        ),
        ("On the critical path", _critical_text(*view.critical_ns(span))),
        ("Stage", _stage_text(view, span)),
    ]
    if reason := _BROKEN_LINKS.get(view.root_reason_name(span)):
        fields.append(("Shown as a root", reason))
    if adjusted := view.adjustment_name(span):
        analysed_under = view.spans["span_id"][analysis_parent] if analysis_parent >= 0 else "(a root)"
        fields.append(("Adjusted", f"{ADJUSTMENT_NOTES[adjusted]}; analysed under {analysed_under}"))
    elif parent != analysis_parent:
        fields.append(("Analysed under", str(view.spans["span_id"][analysis_parent])))
    if row.get("scope_name"):
        fields.append(("Scope", f"{row['scope_name']} {row.get('scope_version') or ''}".strip()))
    children: list[Component] = [
        html.H3(f"{row['service_name']}: {row['name']}", className="hs-detail-title"),
        _table(fields, ("Field", "Value")),
    ]
    pieces = view.pieces_of(span)
    if len(pieces) > 1:
        children += [
            html.H4("Stage pieces"),
            _table(
                [
                    (stage_label(stage), format_duration_ns(end - begin), format_share(_share(end - begin, duration)))
                    for stage, begin, end in pieces
                ],
                ("Stage", "Time", "Share"),
                swatches=[STAGE_COLORS.get(stage, NEUTRAL_COLOR) for stage, _, _ in pieces],
            ),
        ]
    call = view.model_calls.filter(pl.col("index") == span)
    if call.height:
        children += [html.H4("Model call"), _table(_call_fields(call.row(0, named=True)), ("Field", "Value"))]
    attribute_map = attribute_dict(row.get("attributes"))
    event_pairs = [
        (str(name), attribute_dict(attrs))
        for name, attrs in zip(row.get("event_names") or [], row.get("event_attributes") or [], strict=False)
    ]
    children += _messages_panel(span_messages(attribute_map, event_pairs))
    attributes = sorted(attribute_map.items())
    children += [
        html.H4(f"Attributes ({len(attributes)})"),
        _table([(key, format_attribute(key, value)) for key, value in attributes], ("Key", "Value"))
        if attributes
        else html.P("none", className="hs-hint"),
    ]
    events = list(
        zip(
            row.get("event_times_unix_nano") or [],
            row.get("event_names") or [],
            row.get("event_attributes") or [],
            strict=False,
        )
    )
    if events:
        children += [
            html.H4(f"Events ({len(events)})"),
            _table(
                [
                    (
                        f"+{format_duration_ns(int(time_ns) - view.start_ns)}",
                        str(name),
                        ", ".join(f"{k}={format_attribute(k, v)}" for k, v in sorted(attribute_dict(attrs).items())),
                    )
                    for time_ns, name, attrs in events
                ],
                ("At", "Name", "Attributes"),
            ),
        ]
    resource = sorted(attribute_dict(row.get("resource_attributes")).items())
    children.append(html.Details([html.Summary(f"Resource ({len(resource)})"), _table(resource, ("Key", "Value"))]))
    return html.Div(children)


_PART_MARKS = {"tool_call": "calls tool", "tool_result": "tool result", "reasoning": "reasoning", "other": "content"}
"""How a non-text part is introduced in the messages panel."""


def _messages_panel(found: SpanMessages) -> list[Component]:
    """The span's messages (:func:`analysis.messages.span_messages`): each with its role, size and parts, long
    texts cut with what was left out counted; nothing when the span carries none."""
    if not found.messages:
        return []
    items: list[Component] = []
    for message in found.messages:
        parts: list[Component] = []
        for part in message.parts:
            label = _PART_MARKS.get(part.kind)
            heading = f"{label} {part.name}".strip() if label else ""
            cut = f"\n… {part.cut_chars:,} more characters" if part.cut_chars else ""
            parts.append(
                html.Div(
                    [html.Span(heading, className="hs-message-mark") if heading else None, html.Pre(part.text + cut)],
                    className=f"hs-message-part hs-message-{part.kind}",
                )
            )
        items.append(
            html.Div(
                [
                    html.Div(
                        [html.Strong(message.role), f" · {message.direction} · {message.size_bytes:,} bytes"],
                        className="hs-message-head",
                    ),
                    *parts,
                ],
                className=f"hs-message hs-message-{message.direction}",
            )
        )
    omitted = [html.P(f"{found.omitted:,} more messages not shown", className="hs-hint")] if found.omitted else []
    conventions = sorted({message.convention for message in found.messages})
    return [
        html.H4(f"Messages ({len(found.messages) + found.omitted})"),
        html.P(f"as written by: {', '.join(conventions)}", className="hs-hint"),
        html.Div(items + omitted, id="span-messages", className="hs-messages"),
    ]


_KIND_LABELS = {"service": "service", "agent": "agent", "model": "model", "tool": "tool", "retrieval": "retrieval"}


def agent_graph_panel(view: TraceView) -> Component:
    """The trace's agent graph (:attr:`query.trace_model.TraceView.agent_graph`): :func:`agent_edges_panel`."""
    return agent_edges_panel(view.agent_graph, "trace-agent-graph-body", "in this trace")


def agent_edges_panel(edges: pl.DataFrame, element_id: str, where: str) -> Component:
    """Agent graph edges (:data:`analysis.agent_graph.EDGE_SCHEMA`) as each caller with the calls it made: kind
    and name, calls (and the traces they occur in, where more than one), summed duration and time on the critical
    path; calls on the critical path are marked (``hs-agent-critical``), the longest first. ``where`` ends the
    sentence said when there are none ("in this trace")."""
    if not edges.height:
        return html.P(f"No agent, model, tool or retrieval calls recognised {where}.", className="hs-hint")
    callers: dict[tuple[str, str], list[dict]] = {}
    for edge in edges.iter_rows(named=True):
        callers.setdefault((edge["source_kind"], edge["source"]), []).append(edge)
    blocks: list[Component] = []
    for (kind, name), out in callers.items():
        rows = [
            html.Li(
                className="hs-agent-edge hs-agent-critical" if edge["critical_ns"] else "hs-agent-edge",
                children=[
                    html.Span(f"→ {_KIND_LABELS[edge['target_kind']]} ", className="hs-hint"),
                    html.Strong(edge["target"]),
                    f" · {edge['calls']:,} call{'s' if edge['calls'] != 1 else ''}"
                    + (f" in {edge['traces']:,} traces" if edge["traces"] > 1 else "")
                    + f" · {format_duration_ns(edge['duration_ns'])}"
                    f" · {format_duration_ns(edge['critical_ns'])} on the critical path"
                    + (f" · {edge['errors']:,} failed" if edge["errors"] else ""),
                ],
            )
            for edge in out
        ]
        blocks.append(
            html.Div(
                className="hs-agent-node",
                children=[html.Span(f"{_KIND_LABELS[kind]} ", className="hs-hint"), html.Strong(name), html.Ul(rows)],
            )
        )
    return html.Div(id=element_id, children=blocks)


def group_detail(view: TraceView, leader: int) -> Component:
    """An aggregate row's detail: its spans' count, summed and typical durations, errors, and the slowest of
    them (buttons that open each one)."""
    groups = view.groups
    group = int(groups.group[leader])
    members = groups.members[groups.offsets[group] : groups.offsets[group + 1]]
    durations = view.duration[members]
    fields = [
        ("Spans", f"{members.size:,}"),
        ("Summed duration", format_duration_ns(int(durations.sum()))),
        ("From first start to last end", format_duration_ns(int(groups.end_ns[group] - groups.start_ns[group]))),
        (
            "Median / p95 / max",
            " / ".join(format_duration_ns(float(np.percentile(durations, q))) for q in (50, 95, 100)),
        ),
        ("Errors", f"{int(groups.errors[group]):,}"),
        ("On the critical path", f"{int(view.on_critical_path[members].sum()):,} spans"),
    ]
    slowest = members[np.argsort(-durations, kind="stable")[:SLOWEST_MEMBERS]]
    return html.Div(
        [
            html.H3(
                f"{view.spans['service_name'][leader]}: {view.spans['name'][leader]} ×{members.size:,}",
                className="hs-detail-title",
            ),
            html.P("Siblings repeating one service and name, shown as one row.", className="hs-hint"),
            _table(fields, ("Field", "Value")),
            html.H4("Slowest"),
            html.Div(
                className="hs-member-list",
                children=[
                    html.Button(
                        _member_text(view, int(member)),
                        id={"type": "trace-member", "span": int(member)},
                        className="hs-button hs-member",
                    )
                    for member in slowest
                ],
            ),
        ]
    )


def _member_text(view: TraceView, span: int) -> str:
    offset = format_duration_ns(int(view.span_start_ns[span] - view.start_ns))
    return f"{format_duration_ns(int(view.duration[span]))} · at +{offset} · {view.spans['span_id'][span]}"


def flame_figure(flame: pl.DataFrame) -> go.Figure:
    """The trace's flame graph (:func:`query.trace_flame.trace_flame`) as a Plotly icicle: width = self time of
    the tile's spans and everything below them, a tile per span or per ``service:operation`` path (merged tiles
    say how many spans), coloured by service. Each tile's ``customdata`` is ``[span, hover text]`` (span -1 for
    the root)."""
    if flame.height <= 1 or int(flame["total_ns"].max() or 0) == 0:  # type: ignore[arg-type]
        return empty_figure("No time to draw")
    notes = [
        f"self {format_duration_ns(self_ns)} · with everything below {format_duration_ns(total_ns)}"
        + (f" · {count:,} spans merged" if count > 1 else "")
        for self_ns, total_ns, count in zip(
            flame["self_ns"].to_list(), flame["total_ns"].to_list(), flame["count"].to_list(), strict=True
        )
    ]
    customdata = np.empty((flame.height, 2), dtype=object)
    customdata[:, 0] = flame["span"].to_list()
    customdata[:, 1] = notes
    levels = int(flame["depth"].max() or 0) + 1  # type: ignore[operator]
    hover = "<b>%{label}</b><br>%{customdata[1]}<extra></extra>"
    return service_icicle(flame, customdata, hover, max(240, 60 + 34 * min(levels, 12)))


def _critical_text(inside_ns: int, outside_ns: int) -> str:
    text = format_duration_ns(inside_ns)
    return f"{text} (+{format_duration_ns(outside_ns)} waiting on nothing traced)" if outside_ns else text


def _stage_text(view: TraceView, span: int) -> str:
    """A span's stage, or what it is split into."""
    pieces = view.pieces_of(span)
    if len(pieces) > 1:
        return "split into " + ", ".join(dict.fromkeys(stage_label(stage) for stage, _, _ in pieces)) + " (below)"
    return stage_label(STAGES[int(view.stage[span])])


def _call_fields(call: dict[str, object]) -> list[tuple[str, str]]:
    """A model call's facts (:attr:`query.trace_model.TraceView.model_calls` row) with units."""
    fields = [
        ("Model", str(call["model"] or "—")),
        ("Provider", str(call["provider"] or "—")),
        ("Input", format_tokens(call["input_tokens"])),  # type: ignore[arg-type]
        ("Output", format_tokens(call["output_tokens"])),  # type: ignore[arg-type]
        ("Cached input", format_tokens(call["cached_input_tokens"])),  # type: ignore[arg-type]
        ("Reasoning", format_tokens(call["reasoning_tokens"])),  # type: ignore[arg-type]
        ("Time to first token", format_duration_ns(call["ttft_ns"]) if call["ttft_ns"] is not None else "—"),  # type: ignore[arg-type]
        ("After the first token", format_duration_ns(call["stream_ns"]) if call["stream_ns"] is not None else "—"),  # type: ignore[arg-type]
        (
            "Kind",
            "engine span (vLLM)"
            if call["engine"]
            else "traced call (model server spans below)"
            if call["traced"]
            else "untraced call",
        ),
    ]
    if not call["counted"]:
        fields.append(("Tokens", "reported again by a call below this one: counted there"))
    return fields


def _facts(facts: list[tuple[str, str]], error_label: str | None = None) -> Component:
    return html.Dl(
        className="hs-facts",
        children=[
            html.Div(
                className="hs-fact" + (" hs-fact-error" if label == error_label else ""),
                children=[html.Dt(label), html.Dd(value)],
            )
            for label, value in facts
        ],
    )


def _table(rows: list[tuple[str, ...]], columns: tuple[str, ...], swatches: list[str] | None = None) -> Component:
    """A compact table of text cells under a header row; ``swatches`` colours a square before each first cell."""
    body = []
    for index, row in enumerate(rows):
        first: list[Component | str] = [row[0]]
        if swatches:
            first.insert(0, html.Span(className="hs-swatch", style={"background": swatches[index]}))
        body.append(html.Tr([html.Td(first), *(html.Td(cell) for cell in row[1:])]))
    return html.Table(
        className="hs-kv", children=[html.Thead(html.Tr([html.Th(name) for name in columns])), html.Tbody(body)]
    )


def _share(part: float, whole: float) -> float | None:
    return float(part) / float(whole) if whole else None
