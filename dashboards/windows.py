"""Time windows of the rollup pages (Services, Topology): a lookback choice → ``(start_ns, end_ns, step_s)``.
Pure functions."""

from __future__ import annotations

import math

from dashboards.query_form import LOOKBACKS
from units import NS_PER_S

ROLLUP_LOOKBACKS = ("15m", "1h", "6h", "24h", "7d", "30d", "all")
"""Lookback keys offered (see :data:`dashboards.query_form.LOOKBACKS`); "all" spans the stored rollups."""
DEFAULT_ROLLUP_LOOKBACK = "all"
"""Default, as on the search page: imported captures are often years old."""
TARGET_POINTS = 60
"""Series points aimed at per window; the step is rounded up to whole minutes."""


def rollup_window(lookback: str, now_ns: int, stored: tuple[int, int] | None) -> tuple[int, int, int]:
    """``(start_ns, end_ns, step_s)`` for ``lookback``.

    Args:
        lookback: a key of :data:`ROLLUP_LOOKBACKS` (unknown keys read as the default).
        now_ns: the current time, ns since the epoch.
        stored: ``(first, end)`` ns of the stored rollups (``RollupReader.rollup_time_range``), used by "all";
            None when nothing is stored.

    Returns:
        The window and a step: a multiple of 60 s giving at most about :data:`TARGET_POINTS` points.
    """
    key = lookback if lookback in ROLLUP_LOOKBACKS else DEFAULT_ROLLUP_LOOKBACK
    window_ns = LOOKBACKS[key][1]
    if window_ns is None:
        start, end = stored if stored is not None else (now_ns - 3600 * NS_PER_S, now_ns)
    else:
        start, end = now_ns - window_ns, now_ns
    minutes = max(1, math.ceil((end - start) / NS_PER_S / 60 / TARGET_POINTS))
    return start, end, minutes * 60


def lookback_options() -> list[dict[str, str]]:
    """Dropdown options for :data:`ROLLUP_LOOKBACKS`."""
    return [{"label": LOOKBACKS[key][0], "value": key} for key in ROLLUP_LOOKBACKS]


def analysis_window(lookback: str, now_ns: int, stored: tuple[int, int] | None) -> tuple[int | None, int | None, int]:
    """``(start_ns, end_ns, step_s)`` for the analysis pages (Stages, Hotspots, Diagnosis): like
    :func:`rollup_window`, except that "all" leaves both ends open (``None``) so no analysed request is cut
    off by the rollups' minute edges; its step still comes from ``stored``."""
    start, end, step = rollup_window(lookback, now_ns, stored)
    if lookback not in ROLLUP_LOOKBACKS or LOOKBACKS[lookback][1] is None:
        return None, None, step
    return start, end, step
