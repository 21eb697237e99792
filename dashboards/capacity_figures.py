"""The Services page's capacity panel: the capacity health score (:mod:`diagnosis.capacity`) of each vLLM service
and its engines, as one HTML table. Pure functions from a :class:`query.capacity.CapacityReport`, no I/O.

One row per service (its engines under it, indented): the score on a colour of its band, each part as a small bar
of its headroom with the input it came from in its unit, and the part limiting the score in words ("KV cache 92%
full"). Without Prometheus, or when it fails, one line saying so.

Bands follow the example alert rules (``alerts/capacity.rules.yml``): under 25 a service pages, under 40 an engine
opens a ticket; 70 and over leaves room for a burst.
"""

from __future__ import annotations

from collections.abc import Callable

from dash import html
from dash.development.base_component import Component

from dashboards.format import format_duration_ns, format_per_second
from diagnosis.capacity import PARTS, CapacityInputs, CapacityScore, CapacitySettings
from query.capacity import CapacityReport

BANDS: tuple[tuple[float, str, str], ...] = (
    (25.0, "exhausted", "#d62728"),
    (40.0, "low", "#e8590c"),
    (70.0, "tight", "#e0a800"),
    (float("inf"), "healthy", "#2f9e44"),
)
"""``(upper bound, name, colour)``: a score (or a part's headroom times 100) below the bound is in the band."""
UNKNOWN_COLOR = "#9ca3af"
PART_LABELS = {"kv_cache": "KV cache", "queue": "Queue", "ttft": "TTFT p95", "rate": "Rate"}
"""Column heading of each part."""


def band(value: float | None) -> tuple[str, str]:
    """``(name, colour)`` of a 0-100 figure's band (:data:`BANDS`); ``("unknown", grey)`` for None."""
    if value is None:
        return "unknown", UNKNOWN_COLOR
    return next((name, colour) for bound, name, colour in BANDS if value < bound)


def _kv(inputs: CapacityInputs, settings: CapacitySettings) -> str | None:
    return None if inputs.kv_cache_usage is None else f"{inputs.kv_cache_usage:.0%} full"


def _queue(inputs: CapacityInputs, settings: CapacitySettings) -> str | None:
    if inputs.requests_waiting is None:
        return None
    return f"{inputs.requests_waiting:.1f} waiting, {inputs.requests_running or 0.0:.1f} running"


def _ttft(inputs: CapacityInputs, settings: CapacitySettings) -> str | None:
    if inputs.ttft_p95_seconds is None:
        return None
    slo = format_duration_ns(settings.ttft_slo_s * 1e9)
    return f"{format_duration_ns(inputs.ttft_p95_seconds * 1e9)} (SLO {slo})"


def _rate(inputs: CapacityInputs, settings: CapacitySettings) -> str | None:
    if inputs.request_rate_per_s is None:
        return None
    rate = format_per_second(inputs.request_rate_per_s, "req")
    return f"{rate} of {format_per_second(settings.max_rate_per_s, 'req')}" if settings.max_rate_per_s else rate


INPUT_TEXT: dict[str, Callable[[CapacityInputs, CapacitySettings], str | None]] = {
    "kv_cache": _kv,
    "queue": _queue,
    "ttft": _ttft,
    "rate": _rate,
}
"""Part → the input it is computed from, in words with its unit (None without data)."""


def limit_text(score: CapacityScore, settings: CapacitySettings) -> str:
    """The part limiting ``score`` in words, e.g. ``"KV cache 92% full"``, ``"TTFT p95 2.40 s (SLO 2.00 s)"``;
    ``"no data"`` without parts."""
    weakest = score.weakest_part
    if weakest is None:
        return "no data"
    return f"{PART_LABELS[weakest]} {INPUT_TEXT[weakest](score.inputs, settings)}"


def capacity_panel(report: CapacityReport) -> Component:
    """The panel for ``report``: the one-line reason when it holds no scores (no Prometheus configured, Prometheus
    failing, no vLLM series in the window), else the table (module docstring)."""
    if report.status == "not_configured":
        return html.P(report.message, className="hs-hint hs-capacity-status")
    if report.status == "unavailable":
        return html.P(report.message, className="hs-message hs-capacity-status")
    if not report.scores:
        return html.P(
            "Prometheus holds no vLLM engine series over the window (vllm:kv_cache_usage_perc, "
            "vllm:num_requests_waiting ...): is it scraping the engines' /metrics?",
            className="hs-hint hs-capacity-status",
        )
    header = html.Tr(
        [html.Th("Service / engine"), html.Th("Score")]
        + [html.Th(PART_LABELS[part]) for part in PARTS]
        + [html.Th("Weakest part")]
    )
    rows = []
    engines = report.of_scope("engine")
    for service in report.of_scope("service"):
        rows.append(_row(service, report.settings))
        rows.extend(_row(engine, report.settings) for engine in engines if engine.service == service.name)
    return html.Table(className="hs-kv hs-capacity-table", children=[html.Thead(header), html.Tbody(rows)])


def _row(score: CapacityScore, settings: CapacitySettings) -> Component:
    name, colour = band(score.score)
    figure = "—" if score.score is None else f"{score.score:.0f}"
    return html.Tr(
        className=f"hs-capacity-row hs-capacity-{score.scope}",
        children=[
            html.Td(score.name, className="hs-capacity-name", title=f"{score.scope} of {score.service}"),
            html.Td(
                html.Span(figure, className="hs-capacity-score", style={"background": colour}, title=name),
                **{"data-band": name},
            ),
            *(_part_cell(score, part, settings) for part in PARTS),
            html.Td(limit_text(score, settings), className="hs-capacity-limit"),
        ],
    )


def _part_cell(score: CapacityScore, part: str, settings: CapacitySettings) -> Component:
    """A part's headroom as a bar (none for a part not scored) above its input in words."""
    text = INPUT_TEXT[part](score.inputs, settings) or "—"
    headroom = score.parts.get(part)
    if headroom is None:
        note = " (not scored)" if text != "—" else ""
        return html.Td(html.Div(text + note, className="hs-hint"), className="hs-capacity-part")
    colour = band(headroom * 100)[1]
    bar = html.Div(
        className="hs-capacity-bar",
        title=f"headroom {headroom:.0%}",
        children=html.Div(className="hs-capacity-fill", style={"width": f"{headroom:.0%}", "background": colour}),
    )
    return html.Td([bar, html.Div(text, className="hs-capacity-input")], className="hs-capacity-part")
