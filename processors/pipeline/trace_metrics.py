"""Prometheus metrics derived from whole traces: span metrics and service-graph metrics under the OpenTelemetry
Collector connectors' names, and Hotspan's stage and hotspot metrics.

========================================================  ==========================================================
metric                                                    labels, unit
========================================================  ==========================================================
``traces_span_metrics_calls_total``                       service_name, span_name, span_kind, status_code
``traces_span_metrics_duration_milliseconds`` (histogram) same; **ms**, buckets :data:`SPAN_BUCKETS_MS`
``traces_service_graph_request_total``                    client, server, connection_type
``traces_service_graph_request_failed_total``             same
``traces_service_graph_request_server_seconds`` (hist.)   same; **s**, buckets :data:`SERVICE_GRAPH_BUCKETS_S`
``traces_service_graph_request_client_seconds`` (hist.)   same; **s**
``traces_service_graph_unpaired_spans_total``             client, server (the other one empty)
``hotspan_stage_duration_seconds`` (histogram)            service (the request's root service), stage; **s**,
                                                          critical-path time of one request in one stage
``hotspan_hotspot_spans_total``                           service_name, reason
========================================================  ==========================================================

Label values follow the connectors: ``span_kind`` ``SPAN_KIND_SERVER``..., ``status_code`` ``STATUS_CODE_ERROR``...,
``connection_type`` ``""``/``database``/``messaging_system``/``virtual_node``. The span metrics count every span
of a trace, the servicegraph metrics every call (:mod:`processors.pipeline.service_graph`).

**Several Hotspan processes.** The numbers are incremented in-process when the trace pipeline analyses a trace
for the first time (``first_seen``). Pipeline instances split the traces by trace-ID hash, so each trace is
counted once, by the process that analysed it (data an OTel Collector wrote into ClickHouse included). Like the
OTel connectors, each process therefore exposes *its own share*: scrape every Hotspan process and aggregate
with ``sum by (...)`` (``rate()`` handles a restart's reset). Counters start at zero with the process; history
lives in ClickHouse (the RED and service-graph rollups), not in these counters.

**Late spans.** Spans that arrive after their trace was first analysed (later than ``trace_idle_s``) are not
counted here, as the connectors drop spans that arrive after their pairing window; the RED rollup, filled at
insert, still counts them.

**Exemplars.** The duration histograms carry, per series and bucket, one OpenMetrics exemplar: the slowest
observation of that bucket in the latest batch that reached it, labelled ``trace_id`` (32 lowercase hex digits, the
stored trace's ID, the label Grafana's Prometheus data source and the spanmetrics connector use) and, where the
observation is one span, ``span_id``; its value is the observation (the metric's unit), its timestamp the moment
Hotspan counted it (s since the epoch, when the bucket's count rose, so the exemplar sits on the spike it explains).
Only the OpenMetrics format shows them (``hotspan.metrics``). The overflow series keeps exemplars of the
observations it folded in; memory stays bounded (one per bucket per series). A trace tail sampling drops is counted
but never an exemplar: its spans are deleted, and the link would open nothing; a bucket whose batch held only such
traces keeps its previous exemplar.

**Cardinality limit.** Each family keeps at most ``limit`` series (``HOTSPAN_CARDINALITY_LIMIT``), as the OTel
spanmetrics connector's ``aggregation_cardinality_limit`` does: the first ``limit`` label sets seen keep their own
series (within one batch the busiest first, then by labels), and every later new label set adds to one overflow
series labelled only ``otel_metric_overflow="true"`` (the connector's ``otel.metric.overflow`` attribute as its
Prometheus exporter writes it). A series never moves once placed, so every series stays a monotonic counter; the
sum over a family (overflow included) is still every span, call or request counted; memory and the size of a
scrape stay bounded whatever the senders name.

**Exposition in parts.** ``/metrics`` does not collect these families whole: it writes each in parts of
:data:`EXPOSITION_PART_SERIES` series (:meth:`TraceMetrics.parts`), each part with prometheus_client's own encoder, and
streams the text part by part (``hotspan.metrics``). Collected whole, a scrape at the default limit built all its
156,000 samples as objects (a tuple, a dict of labels, a line each) and the 18 MiB text twice (str, then bytes), which
took the server's Python heap from 100 to 154 one-MiB arenas and glibc's heaps from 69 to 110 MiB, none of it returned
after the scrapes (measured at e22fe4d, ``tests/reliability/test_reliability_cardinality.py``). A part holds a few
thousand samples.

Thread-safe: updates and scrapes take one lock per family; the tables hold aggregated state, so a batch of a
million spans is a handful of numpy operations, not a call per span. A scrape copies a family's numbers under its lock
and builds the parts' samples outside it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

import numpy as np
import polars as pl
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar

from analysis import TraceAnalysis, stage_breakdown
from processors.pipeline.service_graph import CONNECTOR_CONNECTION_TYPES, RecentKeys, ServiceGraph, batch_key
from storage.rollup_sql import CARDINALITY_LIMIT, SPAN_BUCKETS_MS
from storage.tenancy import DEFAULT_TENANT

SERVICE_GRAPH_BUCKETS_S: tuple[float, ...] = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.05,
    0.1,
    0.2,
    0.4,
    0.8,
    1.0,
    1.4,
    2.0,
    5.0,
    10.0,
    15.0,
)
"""The servicegraph connector's default latency buckets, in **seconds** (the connector moved from ms to s; the
metric names say seconds, so do the values)."""

STAGE_BUCKETS_S: tuple[float, ...] = SERVICE_GRAPH_BUCKETS_S
"""Buckets of ``hotspan_stage_duration_seconds`` (s); the same boundaries, so stage SLO thresholds line up."""

SPAN_METRIC_LABELS = ("service_name", "span_name", "span_kind", "status_code")
SERVICE_GRAPH_LABELS = ("client", "server", "connection_type")
STAGE_LABELS = ("service", "stage")
HOTSPOT_LABELS = ("service_name", "reason")

SPAN_EXEMPLAR_LABELS = ("trace_id", "span_id")
"""Exemplar labels of a histogram whose observations are spans (the spanmetrics connector's)."""
TRACE_EXEMPLAR_LABELS = ("trace_id",)
"""Exemplar labels of a histogram whose observations are whole requests (a stage's time spans many spans)."""

OVERFLOW_LABEL = "otel_metric_overflow"
"""Label of the overflow series (value ``"true"``), the only label it has."""

Key = tuple[str, ...]
OVERFLOW: Key = ()
"""Key of the overflow series in a table (a real series has one value per label)."""
_Item = TypeVar("_Item")

EXPOSITION_PART_SERIES = 256
"""Series of one family in one part of :meth:`TraceMetrics.parts`: a histogram series is 19-20 samples of about 150
bytes of text (more with exemplars), so a part is 5,000 samples and under 1 MiB of text (module docstring)."""


def place(known: dict[Key, object], limit: int, weights: dict[Key, float]) -> dict[Key, Key]:
    """Where each label set of a batch is counted: its own series when ``known`` holds it or while fewer than
    ``limit`` real series exist (new ones busiest first, ties by labels), else :data:`OVERFLOW`. Pure.

    Args:
        known: the table's series so far (the overflow series among them or not).
        limit: most real series.
        weights: the batch's label sets, each with its amount (spans, calls) to rank new ones by.
    """
    room = max(limit - (len(known) - (OVERFLOW in known)), 0)
    new = sorted((key for key in weights if key not in known), key=lambda key: (-weights[key], key))
    admitted = set(new[:room])
    return {key: key if key in known or key in admitted else OVERFLOW for key in weights}


def _target(family: Metric, key: Key) -> tuple[Metric, list[str]]:
    """Where a series of ``family`` is added, and its label values: ``family`` itself, or for the overflow series a
    family of the same name and type with only the overflow label (whose samples the caller moves over)."""
    if key != OVERFLOW:
        return family, list(key)
    return type(family)(family.name, "", labels=[OVERFLOW_LABEL]), ["true"]


class CounterTable:
    """A labelled counter kept as ``{label values: total}``, at most ``limit`` series plus the overflow one."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str], limit: int = CARDINALITY_LIMIT) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.limit = limit
        self._values: dict[Key, float] = {}
        self._lock = threading.Lock()

    def add(self, rows: Iterable[tuple[Key, float]]) -> None:
        """Add each ``(label values, amount)``; amounts must be >= 0 (counters only go up). Label sets beyond the
        limit add to the overflow series."""
        batch: dict[Key, float] = {}
        for key, amount in rows:
            batch[key] = batch.get(key, 0.0) + float(amount)
        with self._lock:
            for key, target in place(self._values, self.limit, batch).items():
                self._values[target] = self._values.get(target, 0.0) + batch[key]

    def value(self, *labels: str) -> float:
        """The current total of one series (0 when never incremented); no labels: the overflow series."""
        with self._lock:
            return self._values.get(tuple(labels), 0.0)

    def family(self) -> CounterMetricFamily:
        """The whole family, of the totals at the call."""
        return next(self.parts())

    def parts(self, series: int | None = None) -> Iterator[CounterMetricFamily]:
        """The family in consecutive parts of at most ``series`` series each (None: one part), of the totals at the
        first part; always at least one part, so an empty family still has its header."""
        with self._lock:
            totals = sorted(self._values.items())
        for run in _runs(totals, series):
            family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
            for key, total in run:
                target, values = _target(family, key)
                target.add_metric(values, total)
                if target is not family:
                    family.samples.extend(target.samples)
            yield family


class HistogramTable:
    """A labelled histogram with fixed upper bounds, kept as per-series bucket counts and sums, and per bucket the
    latest batch's slowest observation as an exemplar (module docstring).

    Args:
        bounds: inclusive upper bounds in the metric's unit, ascending; ``+Inf`` is implied.
        exemplar_labels: the exemplar's label names, each also a column of every observed frame (``trace_id``,
            ``span_id``); empty: no exemplars.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        bounds: Sequence[float],
        limit: int = CARDINALITY_LIMIT,
        exemplar_labels: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.bounds = np.asarray(bounds, dtype=np.float64)
        self.limit = limit
        self.exemplar_labels = tuple(exemplar_labels)
        self._counts: dict[Key, np.ndarray] = {}
        self._sums: dict[Key, float] = {}
        self._exemplars: dict[Key, dict[int, Exemplar]] = {}
        self._lock = threading.Lock()

    def observe(self, frame: pl.DataFrame, value: str, sampled_out: frozenset[str] = frozenset()) -> None:
        """Observe every row of ``frame``: label values from the columns named like :attr:`labels`, the
        observation from column ``value`` (in the metric's unit), exemplar labels from the columns named like
        :attr:`exemplar_labels`; label sets beyond the limit go to the overflow series. Rows of a trace in
        ``sampled_out`` (its ``trace_id`` column) are counted but never an exemplar: their trace is not stored.

        Raises:
            polars.exceptions.ColumnNotFoundError: a label, value or exemplar column is missing.
        """
        if frame.height == 0:
            return
        # Prometheus buckets are inclusive upper bounds: a value v belongs to the first bound >= v.
        bucket = np.searchsorted(self.bounds, frame[value].to_numpy().astype(np.float64), side="left")
        # Each group's exemplar is its slowest observation: the one a click on a latency spike is after.
        stored = ~pl.col("trace_id").is_in(list(sampled_out)) if sampled_out else pl.lit(True)
        candidate = pl.when(stored).then(pl.col(value))
        slowest = [
            pl.col(name).filter(stored).sort_by(pl.col(value).filter(stored)).last().alias(f"_exemplar_{name}")
            for name in self.exemplar_labels
        ]
        grouped = (
            frame.with_columns(pl.Series("_bucket", bucket, dtype=pl.Int64))
            .group_by([*self.labels, "_bucket"])
            .agg(pl.len().alias("_n"), pl.col(value).sum().alias("_sum"), candidate.max().alias("_max"), *slowest)
        )
        rows = [(tuple(str(row[name]) for name in self.labels), row) for row in grouped.iter_rows(named=True)]
        weights: dict[Key, float] = {}
        for key, row in rows:
            weights[key] = weights.get(key, 0.0) + row["_n"]
        now_s = time.time()
        with self._lock:
            targets = place(self._counts, self.limit, weights)
            batch_exemplars: dict[tuple[Key, int], Exemplar] = {}
            for key, row in rows:
                target = targets[key]
                counts = self._counts.setdefault(target, np.zeros(len(self.bounds) + 1, dtype=np.int64))
                counts[row["_bucket"]] += row["_n"]
                self._sums[target] = self._sums.get(target, 0.0) + float(row["_sum"])
                if self.exemplar_labels and row["_max"] is not None:
                    # Several label sets may fold into one overflow bucket: the slowest of them stands for it.
                    slot = (target, row["_bucket"])
                    previous = batch_exemplars.get(slot)
                    if previous is None or row["_max"] > previous.value:
                        labels = {name: str(row[f"_exemplar_{name}"]) for name in self.exemplar_labels}
                        batch_exemplars[slot] = Exemplar(labels, float(row["_max"]), now_s)
            for (target, index), exemplar in batch_exemplars.items():
                self._exemplars.setdefault(target, {})[index] = exemplar

    def family(self) -> HistogramMetricFamily:
        """The whole family, of the counts at the call."""
        return next(self.parts())

    def parts(self, series: int | None = None) -> Iterator[HistogramMetricFamily]:
        """The family in consecutive parts of at most ``series`` series each (None: one part), of the counts at the
        first part; always at least one part, so an empty family still has its header."""
        with self._lock:
            # Copies: an observation between two parts must not change a series already copied.
            snapshot = [
                (key, np.cumsum(self._counts[key]), self._sums[key], dict(self._exemplars.get(key, {})))
                for key in sorted(self._counts)
            ]
        edges = [_le(bound) for bound in self.bounds] + ["+Inf"]
        for run in _runs(snapshot, series):
            family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
            for key, cumulative, total, exemplars in run:
                target, values = _target(family, key)
                buckets = [
                    (edge, float(count), exemplars[index]) if index in exemplars else (edge, float(count))
                    for index, (edge, count) in enumerate(zip(edges, cumulative, strict=True))
                ]
                target.add_metric(values, buckets, total)
                if target is not family:
                    family.samples.extend(target.samples)
            yield family


class TraceMetrics(Collector):
    """The metric families of this module, each holding at most ``limit`` series plus the overflow one (module
    docstring).

    Args:
        registry: where :meth:`collect` is registered; None for none: the server's ``/metrics`` streams
            :meth:`parts` instead (``hotspan.metrics``), which costs a scrape far less memory.
    """

    def __init__(self, registry: CollectorRegistry | None, limit: int = CARDINALITY_LIMIT) -> None:
        self.span_calls = CounterTable(
            "traces_span_metrics_calls",
            "Spans seen, per service, span name, kind and status.",
            SPAN_METRIC_LABELS,
            limit=limit,
        )
        self.span_duration = HistogramTable(
            "traces_span_metrics_duration_milliseconds",
            "Span duration in milliseconds.",
            SPAN_METRIC_LABELS,
            SPAN_BUCKETS_MS,
            limit=limit,
            exemplar_labels=SPAN_EXEMPLAR_LABELS,
        )
        self.requests = CounterTable(
            "traces_service_graph_request",
            "Calls between two nodes of the service graph.",
            SERVICE_GRAPH_LABELS,
            limit=limit,
        )
        self.failed = CounterTable(
            "traces_service_graph_request_failed",
            "Calls between two nodes where the client or the server span has status Error.",
            SERVICE_GRAPH_LABELS,
            limit=limit,
        )
        self.server_seconds = HistogramTable(
            "traces_service_graph_request_server_seconds",
            "Call duration seen by the server span, in seconds.",
            SERVICE_GRAPH_LABELS,
            SERVICE_GRAPH_BUCKETS_S,
            limit=limit,
            exemplar_labels=SPAN_EXEMPLAR_LABELS,
        )
        self.client_seconds = HistogramTable(
            "traces_service_graph_request_client_seconds",
            "Call duration seen by the client span, in seconds.",
            SERVICE_GRAPH_LABELS,
            SERVICE_GRAPH_BUCKETS_S,
            limit=limit,
            exemplar_labels=SPAN_EXEMPLAR_LABELS,
        )
        self.unpaired = CounterTable(
            "traces_service_graph_unpaired_spans",
            "Client spans with no server span and no peer attribute (label client), and server spans whose"
            " parent is not a client span in the trace (label server).",
            ("client", "server"),
            limit=limit,
        )
        self.stage_seconds = HistogramTable(
            "hotspan_stage_duration_seconds",
            "Critical-path time one request spent in one stage, in seconds; service is the request's root service.",
            STAGE_LABELS,
            STAGE_BUCKETS_S,
            limit=limit,
            exemplar_labels=TRACE_EXEMPLAR_LABELS,
        )
        self.hotspots = CounterTable(
            "hotspan_hotspot_spans", "Spans flagged as hotspots, per service and reason.", HOTSPOT_LABELS, limit=limit
        )
        self._tables: tuple[CounterTable | HistogramTable, ...] = (
            self.span_calls,
            self.span_duration,
            self.requests,
            self.failed,
            self.server_seconds,
            self.client_seconds,
            self.unpaired,
            self.stage_seconds,
            self.hotspots,
        )
        if registry is not None:
            registry.register(self)

    def collect(self) -> Iterator[Metric]:
        for table in self._tables:
            yield table.family()

    def parts(self) -> Iterator[Metric]:
        """Every family of :meth:`collect`, in its order, each in consecutive parts of at most
        :data:`EXPOSITION_PART_SERIES` series that share its name, documentation and type (module docstring). Each
        family's numbers are copied under its lock when its first part is reached."""
        for table in self._tables:
            yield from table.parts(EXPOSITION_PART_SERIES)

    def observe_spans(self, spans: pl.DataFrame, sampled_out: frozenset[str] = frozenset()) -> None:
        """Count every span of ``spans`` (the :mod:`analysis.spans` frame, plus ``status_code``); no exemplar names a
        trace of ``sampled_out``."""
        if spans.height == 0:
            return
        status = pl.col("status_code") if "status_code" in spans.columns else pl.lit("Unset")
        frame = spans.select(
            pl.col("service_name"),
            pl.col("name").alias("span_name"),
            ("SPAN_KIND_" + pl.col("kind").str.replace(r"^SPAN_KIND_", "").str.to_uppercase()).alias("span_kind"),
            ("STATUS_CODE_" + status.str.replace(r"^STATUS_CODE_", "").str.to_uppercase()).alias("status_code"),
            ((pl.col("end_time_unix_nano") - pl.col("start_time_unix_nano")) / 1e6).alias("duration_ms"),
            pl.col("trace_id"),
            pl.col("span_id"),
        )
        counts = frame.group_by(SPAN_METRIC_LABELS).len()
        self.span_calls.add((tuple(row[:4]), row[4]) for row in counts.iter_rows())
        self.span_duration.observe(frame, "duration_ms", sampled_out)

    def observe_service_graph(self, graph: ServiceGraph, sampled_out: frozenset[str] = frozenset()) -> None:
        """Count the calls of ``graph`` (durations of a side without a span are not observed); no exemplar names a
        trace of ``sampled_out``."""
        edges = graph.edges.with_columns(
            pl.col("connection_type").replace_strict(CONNECTOR_CONNECTION_TYPES, default=""),
            (pl.col("client_duration_ns") / 1e9).alias("client_s"),
            (pl.col("server_duration_ns") / 1e9).alias("server_s"),
        )
        grouped = edges.group_by(SERVICE_GRAPH_LABELS).agg(pl.len().alias("n"), pl.col("failed").sum().alias("f"))
        rows = list(grouped.iter_rows())
        self.requests.add((tuple(row[:3]), row[3]) for row in rows)
        self.failed.add((tuple(row[:3]), row[4]) for row in rows if row[4])
        client_spans = edges.filter(pl.col("has_client_span")).with_columns(pl.col("client_span_id").alias("span_id"))
        server_spans = edges.filter(pl.col("has_server_span")).with_columns(pl.col("server_span_id").alias("span_id"))
        self.client_seconds.observe(client_spans, "client_s", sampled_out)
        self.server_seconds.observe(server_spans, "server_s", sampled_out)
        self.unpaired.add(((service, ""), n) for service, n in graph.unpaired_client_spans)
        self.unpaired.add((("", service), n) for service, n in graph.unpaired_server_spans)

    def observe_stages(self, stages: pl.DataFrame, sampled_out: frozenset[str] = frozenset()) -> None:
        """Observe per-request stage times: columns ``trace_id`` (the request's trace, the exemplar unless in
        ``sampled_out``), ``service`` (root service), ``stage`` and ``duration_ns`` (critical-path ns of that
        request in that stage)."""
        seconds = stages.with_columns((pl.col("duration_ns") / 1e9).alias("seconds"))
        self.stage_seconds.observe(seconds, "seconds", sampled_out)

    def observe_hotspots(self, counts: Iterable[tuple[str, str, int]]) -> None:
        """Count hotspot spans given as ``(service, reason, spans)``; an empty reason reads ``flagged``."""
        self.hotspots.add(((service, reason or "flagged"), spans) for service, reason, spans in counts)


def _runs(items: Sequence[_Item], size: int | None) -> Iterator[Sequence[_Item]]:
    """``items`` in consecutive runs of ``size`` (None: one run); one empty run when ``items`` is empty."""
    step = size or max(len(items), 1)
    for start in range(0, max(len(items), 1), step):
        yield items[start : start + step]


def _le(bound: float) -> str:
    """A bucket bound as Prometheus clients print it (``2.0``, ``0.002``)."""
    return repr(float(bound))


class HotspotSource(Protocol):
    """Where the trace pipeline's hotspot flags are read back (implemented by
    :class:`storage.rollup_reader.ClickHouseRollupReader`)."""

    def hotspot_counts(self, trace_ids: list[str], *, tenant: str | None) -> list[tuple[str, str, int]]:
        """``(service, reason, spans)`` of the hotspot spans flagged in ``trace_ids``."""
        ...


class TraceMetricsProcessor:
    """:class:`~processors.pipeline.base.TraceProcessor` feeding :class:`TraceMetrics` from each trace analysed
    for the first time: every span into the span metrics, each request's critical-path time per stage into
    ``hotspan_stage_duration_seconds`` (labelled with its root service), and the hotspot spans the pipeline
    flagged (read back from ``hotspan_span_analysis``, which the pipeline writes before it runs processors).

    A batch the pipeline offers again (a later step failed) is recognised by its key and not counted twice.

    Args:
        metrics: the process's metric families.
        hotspots: where the pipeline's hotspot flags are read; None leaves the hotspot counter alone.
    """

    def __init__(self, metrics: TraceMetrics, hotspots: HotspotSource | None = None) -> None:
        self._metrics = metrics
        self._hotspots = hotspots
        self._counted = RecentKeys()

    def process(
        self,
        spans: pl.DataFrame,
        analysis: TraceAnalysis,
        first_seen: set[str],
        sampled_out: frozenset[str] = frozenset(),
    ) -> None:
        """Count the ``first_seen`` traces of the batch; a ``sampled_out`` trace is counted, never an exemplar.

        Raises:
            Exception: reading the hotspot flags failed; nothing of this batch was counted then.
        """
        if not first_seen:
            return
        fresh_ids = sorted(first_seen)
        key = batch_key(spans, first_seen)
        tenant = str(spans["tenant"][0]) if "tenant" in spans.columns and spans.height else DEFAULT_TENANT
        hotspots = self._hotspots.hotspot_counts(fresh_ids, tenant=tenant) if self._hotspots is not None else []
        if not self._counted.add(key):
            return
        tree = analysis.tree
        # analysis.tree holds each span once, where ``spans`` may repeat a span an exporter sent twice.
        self._metrics.observe_spans(tree.spans.filter(pl.col("trace_id").is_in(fresh_ids)), sampled_out)
        roots = pl.DataFrame(
            {
                "trace_id": tree.spans["trace_id"].gather(tree.primary_root),
                "service": tree.spans["service_name"].gather(tree.primary_root),
            }
        )
        stages = (
            stage_breakdown(analysis)
            .filter(pl.col("trace_id").is_in(fresh_ids))
            .join(roots, on="trace_id", how="inner")
            .select("trace_id", "service", pl.col("stage").cast(pl.String), "duration_ns")
        )
        self._metrics.observe_stages(stages, sampled_out)
        self._metrics.observe_hotspots(hotspots)
