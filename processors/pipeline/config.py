"""Configuration of the trace pipeline and of the analysis it serves: one validated object.

Built by Hotspan from its settings (``hotspan.app.trace_pipeline_config``: ``trace_idle_s``, ``stage_rules_path``,
``hotspot_rules_path``, ``hotspot_window_s``, ``prices_path``, ``max_trace_spans``, ``tail_sampling_path``), or
directly in tests. The defaults below are the settings' defaults too (``hotspan.settings`` refers to them), so each
is written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis import StageRules, load_stage_rules
from analysis.pricing import PriceTable, load_price_table
from processors.pipeline.hotspot_rules import HotspotRules, load_hotspot_rules
from processors.pipeline.tail_sampling_policies import TailSamplingConfig
from storage.reader import MAX_TRACE_SPANS


@dataclass(frozen=True)
class TracePipelineConfig:
    """What the pipeline and the per-trace analysis run with.

    Attributes:
        trace_idle_s: a trace is analysed once no span of it has arrived for this long; seconds, >= 0.
        stage_rules: span → stage table (``analysis.stage_rules``).
        hotspot_rules: static thresholds and the rolling-quantile mode (``hotspot_rules``).
        hotspot_window_s: length of the rolling hotspot window; seconds, > 0.
        prices: model prices for the cost of model calls (``analysis.pricing``).
        poll_interval_s: how often the worker looks for quiet traces; seconds, > 0; None picks
            ``min(1, max(0.25, trace_idle_s / 4))``: a trace waits at most about a quarter idle period extra, and
            polls (a few small queries each) never crowd out ingest on an embedded engine.
        batch_traces: most traces analysed together (one read, one analysis, one insert per table).
        batch_spans: most arrived spans per batch (a larger trace still goes alone), bounding memory.
        max_trace_spans: a trace with more arrived spans is not analysed (logged and counted in
            ``PollResult.too_large``): its analysis would hold every span in memory, about 4 KB each
            (``HOTSPAN_MAX_TRACE_SPANS``, as for whole-trace reads).
        visibility_margin_s: how far behind the idle cutoff the worker keeps looking for arrivals: an insert
            is stamped when it starts and becomes visible when it commits, so a slow insert can show up
            stamped in the past; seconds.
        tail_sampling: the tail-sampling policies (``tail_sampling_policies``); None keeps every trace.
        dependency_refresh_s: how often the first pipeline shard refreshes the dependency rollup
            (``storage.dependency_rollup``), after a poll; seconds, >= 0 (0: after every poll).

    Raises:
        ValueError: on construction, listing every out-of-range field.
    """

    trace_idle_s: float = 10.0
    stage_rules: StageRules = field(default_factory=load_stage_rules)
    hotspot_rules: HotspotRules = field(default_factory=load_hotspot_rules)
    hotspot_window_s: float = 3600.0
    prices: PriceTable = field(default_factory=load_price_table)
    poll_interval_s: float | None = None
    batch_traces: int = 500
    batch_spans: int = 200_000
    max_trace_spans: int = MAX_TRACE_SPANS
    visibility_margin_s: float = 300.0
    tail_sampling: TailSamplingConfig | None = None
    dependency_refresh_s: float = 30.0

    def __post_init__(self) -> None:
        problems = [
            f"{name}: must be {rule}, got {getattr(self, name)!r}"
            for name, rule, ok in (
                ("trace_idle_s", ">= 0", self.trace_idle_s >= 0),
                ("hotspot_window_s", "> 0", self.hotspot_window_s > 0),
                ("poll_interval_s", "> 0 or None", self.poll_interval_s is None or self.poll_interval_s > 0),
                ("batch_traces", ">= 1", self.batch_traces >= 1),
                ("batch_spans", ">= 1", self.batch_spans >= 1),
                ("max_trace_spans", ">= 1", self.max_trace_spans >= 1),
                ("visibility_margin_s", ">= 0", self.visibility_margin_s >= 0),
                ("dependency_refresh_s", ">= 0", self.dependency_refresh_s >= 0),
            )
            if not ok
        ]
        if problems:
            raise ValueError("invalid pipeline config: " + "; ".join(problems))

    @property
    def interval_s(self) -> float:
        """The effective poll interval, seconds."""
        if self.poll_interval_s is not None:
            return self.poll_interval_s
        return min(1.0, max(0.25, self.trace_idle_s / 4))
