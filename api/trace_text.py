"""One trace, and one trace's explanation, as compact text for a language model to read (the MCP server's
``get_trace`` and ``explain_trace``, :mod:`api.mcp_server`).

A span is one line: its start after the trace's start and its duration and self time (ms), its stage, ``*`` when
it is on the critical path, ``!`` when its status is Error, then ``service: operation``; its children are indented
under it (the tree as the spans report it, :class:`query.trace_model.TraceView`). A trace of more than
``max_spans`` spans is cut, and the text says what was cut: the spans on the critical path and the longest ones are
kept with every ancestor, and each span shown ends with one line summing its hidden children (how many, their
subtrees' spans, their summed duration, their most common operations). Pure functions of the view.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from analysis import STAGES
from analysis.ancestry import IntArray
from query.trace_explain import TraceExplanation
from query.trace_model import TraceView
from units import NS_PER_MS, NS_PER_S

DEFAULT_MAX_SPANS = 200
"""Spans a rendered trace shows by default."""
MAX_SPANS = 2_000
"""Most spans one rendering shows, whatever is asked: some 100 KB of text."""
HIDDEN_NAMES = 3
"""Operations named in a line summing hidden children."""
MAX_INDENT = 40
"""Levels of a tree indented; deeper spans say their depth instead."""
CANDIDATES = 4
"""Candidates tried per span shown when a trace is cut (module docstring)."""
SECTIONS = 10
"""Critical-path sections an explanation lists (the longest)."""
EVIDENCE_ITEMS = 8
"""Evidence entries an explanation lists per finding (those with a value; the diagnose tool gives them all)."""


def ms(ns: float) -> str:
    """``ns`` as milliseconds with three significant figures below 100 ms (``0.123``, ``12.3``), one decimal
    above."""
    value = ns / NS_PER_MS
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def iso(ns: int) -> str:
    """``ns`` since the Unix epoch as an ISO-8601 UTC time to the millisecond."""
    return datetime.fromtimestamp(ns / NS_PER_S, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def render_trace(view: TraceView, max_spans: int = DEFAULT_MAX_SPANS) -> str:
    """The trace as text (module docstring), at most ``max_spans`` spans (capped at :data:`MAX_SPANS`)."""
    limit = min(max_spans, MAX_SPANS)
    shown = shown_spans(view, limit)
    labels = _labels(view)
    hidden = _hidden_children(view, shown, labels)
    lines = [*_header(view), *_stage_line(view), ""]
    lines.append("Spans: +start ms, duration ms (self ms), stage, * critical path, ! error, service: operation")
    for span in view.order[shown[view.order]].tolist():
        lines.append(_span_line(view, span, labels[span]))
        if span in hidden:
            lines.append(_indent(int(view.depth[span]) + 1) + hidden[span])
    roots = int((~shown & (view.parent < 0)).sum())
    if roots:
        lines.append(f"… {roots} more root span(s) and their subtrees not shown")
    if int(shown.sum()) < view.size:
        lines.append(
            f"Cut: {int(shown.sum())} of {view.size} spans shown (max_spans {limit}); kept the critical path and "
            "the longest spans with their ancestors."
        )
    return "\n".join(lines)


def shown_spans(view: TraceView, max_spans: int) -> npt.NDArray[np.bool_]:
    """Which spans a rendering of at most ``max_spans`` spans shows (a boolean per span): every span when they fit;
    else, by priority (on the critical path first, then the longest), each span with its ancestors not shown yet,
    as long as they fit."""
    shown = np.zeros(view.size, dtype=bool)
    if view.size <= max_spans:
        shown[:] = True
        return shown
    used = 0
    # A candidate whose ancestry no longer fits is passed over; a few times max_spans of them is enough to fill.
    for span in np.lexsort((-view.duration, ~view.on_critical_path))[: CANDIDATES * max_spans].tolist():
        path = _unshown_ancestry(view.parent, span, shown)
        if used + len(path) <= max_spans:
            shown[path] = True
            used += len(path)
        if used == max_spans:
            break
    return shown


def _unshown_ancestry(parent: IntArray, span: int, shown: np.ndarray) -> list[int]:
    """``span`` and its ancestors up to the first one shown (none of them shown)."""
    path: list[int] = []
    while span >= 0 and not shown[span]:
        path.append(span)
        span = int(parent[span])
    return path


def _header(view: TraceView) -> list[str]:
    root = view.primary_root
    summary = view.summary
    errors = int(view.error.sum())
    lines = [
        f"Trace {view.trace_id}: {view.size} spans, {len(view.services)} services, {ms(view.duration_ns)} ms, "
        f"started {iso(view.start_ns)}; root {view.spans['service_name'][root]}: {view.spans['name'][root]} "
        f"({ms(view.root_duration_ns)} ms); {errors} error span(s)",
    ]
    if view.truncated:
        lines.append(
            f"The store holds {view.stored_spans} spans; this view holds the first {view.size} by start "
            "(HOTSPAN_MAX_TRACE_SPANS)."
        )
        lines.extend(_operations(view))
    if summary.get("llm_calls"):
        lines.append(_llm_line(summary))
    lines.extend(f"Data quality: {note}" for note in view.data_quality)
    return lines


def _operations(view: TraceView) -> list[str]:
    """The whole trace's heaviest operations (summed in the store), for a view holding its first spans only."""
    if view.operations is None:
        return []
    top = view.operations.sort("duration_ns_sum", descending=True).head(10)
    return [
        "Whole trace by operation (heaviest first): "
        + "; ".join(
            f"{row['service_name']}: {row['name']} ×{row['span_count']} ({ms(row['duration_ns_sum'])} ms summed)"
            for row in top.iter_rows(named=True)
        )
    ]


def _llm_line(summary: dict[str, Any]) -> str:
    parts = [f"LLM: {summary['llm_calls']} call(s)"]
    if summary.get("model"):
        parts.append(f"model {summary['model']}")
    parts.append(f"{summary.get('input_tokens') or 0} input / {summary.get('output_tokens') or 0} output tokens")
    if summary.get("ttft_ns") is not None:
        parts.append(f"TTFT {ms(summary['ttft_ns'])} ms")
    if summary.get("tpot_ns") is not None:
        parts.append(f"TPOT {ms(summary['tpot_ns'])} ms/token")
    return ", ".join(parts)


def _stage_line(view: TraceView) -> list[str]:
    totals = view.request_stages_ns
    total = int(totals.sum())
    if total <= 0:
        return []
    order = np.argsort(-totals, kind="stable")
    parts = [f"{STAGES[i]} {ms(int(totals[i]))} ms ({totals[i] / total:.0%})" for i in order if totals[i] > 0]
    return ["Stages (root's critical path): " + ", ".join(parts)]


def _labels(view: TraceView) -> list[str]:
    """``service: operation`` per span."""
    return view.spans.select(pl.concat_str("service_name", pl.lit(": "), "name").fill_null("")).to_series().to_list()


def _span_line(view: TraceView, span: int, label: str) -> str:
    marks = ("*" if view.on_critical_path[span] else "") + ("!" if view.error[span] else "")
    offset = ms(int(view.span_start_ns[span]) - view.start_ns)
    return (
        f"{_indent(int(view.depth[span]))}+{offset} {ms(int(view.duration[span]))} ({ms(int(view.self_ns[span]))}) "
        f"{_stage(view, span)}{' ' + marks if marks else ''} {label}"
    )


def _indent(depth: int) -> str:
    """Two spaces a level, at most :data:`MAX_INDENT` levels; deeper spans say their depth."""
    return "  " * min(depth, MAX_INDENT) + (f"[depth {depth}] " if depth > MAX_INDENT else "")


def _stage(view: TraceView, span: int) -> str:
    """The span's stage; for a span cut into pieces (vLLM's phases, an untraced call's first token and stream), each
    lasting piece's stage with its ms (``llm.queue 650.7+llm.prefill 2.34+llm.decode 82``)."""
    totals: dict[str, int] = {}
    for stage, start, end in view.pieces_of(span):
        if end > start:
            totals[stage] = totals.get(stage, 0) + end - start
    if len(totals) <= 1:
        return next(iter(totals), STAGES[int(view.stage[span])])
    return "+".join(f"{stage} {ms(ns)}" for stage, ns in totals.items())


def _hidden_children(view: TraceView, shown: npt.NDArray[np.bool_], labels: list[str]) -> dict[int, str]:
    """Per shown span with hidden children, one line summing them. A hidden child's whole subtree is hidden (a shown
    span's ancestors are all shown), so its display rows ``row`` to ``end_row`` are its subtree's spans."""
    parent = view.parent
    children = np.flatnonzero(~shown & (parent >= 0))
    children = children[shown[parent[children]]]
    if not children.size:
        return {}
    frame = pl.DataFrame(
        {
            "parent": parent[children],
            "label": pl.Series(labels).gather(children),
            "subtree": view.end_row[children] - view.row[children],
            "duration_ns": view.duration[children],
        }
    )
    named = frame.group_by("parent", "label").agg(pl.len().alias("n")).sort("n", "label", descending=[True, False])
    lines = {}
    for (span,), group in frame.group_by("parent"):
        names = named.filter(pl.col("parent") == span)
        common = ", ".join(f"{n}× {label}" for label, n in names.head(HIDDEN_NAMES).select("label", "n").iter_rows())
        others = names.height - min(names.height, HIDDEN_NAMES)
        lines[int(span)] = (
            f"… {group.height} more child span(s) not shown ({int(group['subtree'].sum())} spans with their "
            f"subtrees, {ms(int(group['duration_ns'].sum()))} ms summed): {common}"
            + (f", {others} other operation(s)" if others else "")
        )
    return lines


def render_explanation(explanation: TraceExplanation) -> str:
    """Why the request was slow, as text: its facts, its stages (the top one named), its longest critical-path
    sections, and the findings of its neighbourhood with what each means for this request."""
    view, stages = explanation.view, explanation.stages
    total = stages.total_ns
    lines = _header(view)
    top = explanation.top_stage
    if top is not None:
        top_ns = stages.stages_ns[top]
        lines.append(f"Top stage: {top}, {ms(top_ns)} ms of {ms(total)} ms ({_share(top_ns, total)}).")
    lines += ["", "Where the time went (stages along the root's critical path; they sum to the request's latency):"]
    for stage, ns in sorted(stages.stages_ns.items(), key=lambda item: -item[1]):
        if ns > 0:
            lines.append(f"  {stage}: {ms(ns)} ms ({_share(ns, total)})")
    if stages.disagreements:
        wall = ", ".join(f"{s} {ms(stages.wall_clock_stages_ns[s])} ms" for s in stages.disagreements)
        lines.append(f"The wall-clock attribution (deepest spans active at each instant) differs on: {wall}.")
    lines += ["", *_sections(explanation), "", *_findings(explanation)]
    return "\n".join(lines)


def _sections(explanation: TraceExplanation) -> list[str]:
    path = explanation.critical_path
    if not path.height:
        return ["Critical path: none (the root has no duration)."]
    longest = path.sort("duration_ns", descending=True).head(SECTIONS)
    lines = [f"Critical path, longest sections first ({longest.height} of {path.height}):"]
    lines += [
        f"  {ms(row['duration_ns'])} ms {row['stage']} "
        + (
            f"{row['service_name']}: {row['name']} (span {row['span_id']}, "
            if row["span_id"]
            else "untraced (no span, "
        )
        + f"+{ms(row['start_ns'] - explanation.view.start_ns)} ms)"
        for row in longest.iter_rows(named=True)
    ]
    return lines


def _findings(explanation: TraceExplanation) -> list[str]:
    around, report = explanation.neighbourhood, explanation.report
    scope = (
        f"{report.trace_count} request(s) through {around.service or 'any service'} with a span starting "
        f"{iso(around.start_ns)} to {iso(around.end_ns)} (at most {around.limit}); engine metrics: {report.metrics}"
    )
    if not explanation.findings:
        return [f"Findings: none. No diagnosis rule fired on the {scope}; the stages above are the explanation."]
    lines = [f"Findings of the diagnosis of the {scope}, most severe first:"]
    total = explanation.stages.total_ns
    for number, traced in enumerate(explanation.findings, 1):
        finding = traced.finding
        lines.append(
            f"{number}. {finding.cause} [{finding.severity}, confidence {finding.confidence:.2f}]: {finding.title}"
        )
        here = []
        if traced.stage is not None:
            here.append(f"{ms(traced.trace_stage_ns)} ms ({_share(traced.trace_stage_ns, total)}) in {traced.stage}")
        if traced.example:
            here.append("one of the finding's example requests")
        if here:
            lines.append(f"   This request: {'; '.join(here)}.")
        evidence = [(k, v) for k, v in finding.evidence.items() if k != "example_trace_ids" and v is not None]
        if evidence:
            lines.append("   Evidence: " + ", ".join(f"{k}={v}" for k, v in evidence[:EVIDENCE_ITEMS]))
        lines.append(f"   Remedy: {finding.remedy}")
    lines.extend(f"Rule {error.cause} failed: {error.message}" for error in report.errors)
    return lines


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "n/a"
