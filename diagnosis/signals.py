"""Small numeric helpers the rules share: interval concurrency, rank correlation, tree walks, name globs.

All times are Int64 **nanoseconds**; arrays are numpy, frames polars. Nothing here loops in Python per span.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from analysis.ancestry import reduce_to_root
from analysis.spans import attribute
from analysis.stage_rules import glob_regex

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def in_flight(starts: IntArray, ends: IntArray, at: IntArray) -> IntArray:
    """For each instant of ``at``, how many intervals ``[start, end)`` contain it."""
    return np.searchsorted(np.sort(starts), at, side="right") - np.searchsorted(np.sort(ends), at, side="right")


def mean_concurrency(starts: IntArray, ends: IntArray, lo: IntArray, hi: IntArray) -> FloatArray:
    """For each window ``[lo, hi)``, the time-averaged number of intervals ``[start, end)`` active in it
    (an interval that is itself one of the windows counts itself). Zero-length windows give the count at
    ``lo``.

    The integral of the active count is piecewise linear between interval edges, so it is evaluated at every
    edge once and interpolated at the window bounds.
    """
    if starts.size == 0:
        return np.zeros(lo.size)
    edges = np.concatenate([starts, ends])
    step = np.concatenate([np.ones(starts.size), -np.ones(ends.size)])
    order = np.argsort(edges, kind="stable")
    edges, count = edges[order], np.cumsum(step[order])
    # Integral of the count from the first edge up to each edge (the count is constant between edges).
    integral = np.concatenate([[0.0], np.cumsum(count[:-1] * np.diff(edges).astype(np.float64))])
    area = np.interp(hi, edges, integral) - np.interp(lo, edges, integral)
    length = (hi - lo).astype(np.float64)
    at_lo = in_flight(starts, ends, lo).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(length > 0, area / length, at_lo)


def rank_correlation(x: Sequence[float] | npt.NDArray, y: Sequence[float] | npt.NDArray) -> float | None:
    """Spearman's rank correlation of ``x`` and ``y`` (average ranks for ties), in [-1, 1]; ``None`` with
    fewer than three pairs or when either side is constant."""
    frame = pl.DataFrame({"x": np.asarray(x, dtype=np.float64), "y": np.asarray(y, dtype=np.float64)}).drop_nans()
    frame = frame.drop_nulls()
    if frame.height < 3 or frame["x"].n_unique() < 2 or frame["y"].n_unique() < 2:
        return None
    ranks = frame.select(pl.col("x").rank("average"), pl.col("y").rank("average"))
    return float(np.corrcoef(ranks["x"].to_numpy(), ranks["y"].to_numpy())[0, 1])


def nearest_marked(parent: IntArray, marked: npt.NDArray[np.bool_]) -> IntArray:
    """For every span, the index of the nearest span at or above it (itself, its parent, ...) that is
    ``marked``; -1 when none is. Pointer jumping (:mod:`analysis.ancestry`), so deep chains are cheap."""
    own = np.where(marked, np.arange(parent.size, dtype=np.int64), -1)
    return reduce_to_root(parent, own, _first_set)


def _first_set(below: IntArray, above: IntArray) -> IntArray:
    # Keeps the lower (nearer) mark: associative, as pointer jumping requires.
    return np.where(below >= 0, below, above)


def name_matches(globs: Sequence[str], column: str = "name") -> pl.Expr:
    """True where ``column`` matches one of ``globs`` (``*``/``?``, case-insensitive); False for no globs."""
    if not globs:
        return pl.lit(False)
    return pl.col(column).str.contains(glob_regex(list(globs))).fill_null(False)


def first_attribute(keys: Sequence[str]) -> pl.Expr:
    """The value of the first of ``keys`` present on the span (String), null when none is."""
    if not keys:
        return pl.lit(None, dtype=pl.String)
    return pl.coalesce(*(attribute(key) for key in keys))


def has_any_attribute(keys: Sequence[str]) -> pl.Expr:
    """True where the span carries at least one of ``keys``."""
    if not keys:
        return pl.lit(False)
    return pl.any_horizontal(pl.col("attributes").map.contains_key(key) for key in keys)


def top_traces(frame: pl.DataFrame, weight: str, count: int) -> list[str]:
    """The ``count`` trace IDs of ``frame`` with the largest summed ``weight``, largest first (ties by ID)."""
    if frame.height == 0:
        return []
    ranked = frame.group_by("trace_id").agg(pl.col(weight).sum()).sort([weight, "trace_id"], descending=[True, False])
    return ranked["trace_id"].head(count).to_list()


PREVIOUS_CALL_COLUMNS = ("start_ns", "end_ns", "input_tokens", "output_tokens", "status_code", "model")
"""Columns of the previous model call that :func:`with_previous_call` adds, prefixed ``previous_``."""


def with_previous_call(calls: pl.DataFrame) -> pl.DataFrame:
    """Model calls (:attr:`diagnosis.context.DiagnosisContext.model_calls`, sorted by trace then start) with the
    previous call of the same trace beside each: ``previous_<column>`` for :data:`PREVIOUS_CALL_COLUMNS`, null
    on a trace's first call."""
    return calls.with_columns(
        pl.col(name).shift(1).over("trace_id").alias(f"previous_{name}") for name in PREVIOUS_CALL_COLUMNS
    )


def continues_previous(min_output_share: float) -> pl.Expr:
    """Over :func:`with_previous_call`: whether a call's input grew by at least ``min_output_share`` of the
    previous call's output tokens, i.e. it re-sends that answer (an agent loop's next turn: the chat history
    plus the answer plus tool results). Null where either call's counts are unknown."""
    grown = pl.col("input_tokens") - pl.col("previous_input_tokens")
    return grown >= min_output_share * pl.col("previous_output_tokens")


def subtree_critical_ns(parent: IntArray, spans: pl.DataFrame, roots: IntArray) -> pl.DataFrame:
    """Per trace, the critical-path ns spent in the subtrees of ``roots`` (span indices into ``spans``, the
    context's span view with ``trace_id`` and ``critical_path_ns``), counted once where subtrees nest.
    Columns: trace_id, wasted_ns."""
    marked = np.zeros(spans.height, dtype=bool)
    marked[roots] = True
    inside = nearest_marked(parent, marked) >= 0
    return spans.filter(pl.Series(inside)).group_by("trace_id").agg(pl.col("critical_path_ns").sum().alias("wasted_ns"))


HTTP_STATUS_KEYS = ("http.response.status_code", "http.status_code")
"""Where an HTTP client span records the answer's status (OTel semconv HTTP, current and older names)."""
ERROR_TYPE_KEY = "error.type"
"""OTel semconv's error class; for HTTP it is the status code as a string when the status is an error."""


def http_status() -> pl.Expr:
    """The HTTP status a span reports (Int64): ``http.response.status_code``, the older ``http.status_code``,
    or a three-digit ``error.type``; null when it reports none."""
    error_type = attribute(ERROR_TYPE_KEY)
    return pl.coalesce(
        *(attribute(key).cast(pl.Int64, strict=False) for key in HTTP_STATUS_KEYS),
        pl.when(error_type.str.contains(r"^[0-9]{3}$")).then(error_type.cast(pl.Int64, strict=False)),
    )
