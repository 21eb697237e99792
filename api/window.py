"""The time window of the ``/api/v1`` window routes (RED, topology, analysis): its query parameters and how
their defaults are filled. Times are ns since the Unix epoch."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import Query

from api.errors import ApiError

DEFAULT_WINDOW_NS = 3_600 * 1_000_000_000
"""Window when ``start_ns`` is not given: the hour before ``end_ns``."""

MAX_NS = 2**63 - 1
"""Latest instant ``DateTime64(9)`` and an Int64 of ns can hold (2262-04-11); a larger bound value would wrap."""

MAX_STEP_S = 2**31 - 1
"""Widest series step or bucket a window route takes, s (68 years): its ns fit an Int64 and its seconds a UInt32,
so a larger value is a 422, never an overflow in the SQL it is bound into."""

StartNs = Annotated[
    int | None,
    Query(ge=0, le=MAX_NS, description="Window start, ns since the Unix epoch; default `end_ns` minus 1 h."),
]
EndNs = Annotated[int | None, Query(ge=0, le=MAX_NS, description="Window end, ns since the Unix epoch; default now.")]


def window(start_ns: int | None, end_ns: int | None) -> tuple[int, int]:
    """``(start_ns, end_ns)`` with defaults filled (the last hour). Raises ApiError 400 when start > end."""
    end = end_ns if end_ns is not None else time.time_ns()
    start = start_ns if start_ns is not None else max(0, end - DEFAULT_WINDOW_NS)
    check_order(start, end)
    return start, end


def check_order(start_ns: int | None, end_ns: int | None) -> None:
    """Raise ApiError 400 when both bounds are given and ``start_ns`` is after ``end_ns``."""
    if start_ns is not None and end_ns is not None and start_ns > end_ns:
        raise ApiError(400, "invalid_parameter", f"start_ns: {start_ns} is after end_ns {end_ns}")
