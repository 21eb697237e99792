"""Every tenant's per-minute series for the anomaly baselines: read for all tenants at once, and kept between
evaluations once settled.

An evaluation judges each tenant's window against the minutes before it and the minutes around its time a day
earlier (:mod:`query.anomaly`); at a fleet's size those reads bound it (10 tenants of 1,800 operation and 1,200 stage
series, 30 minutes each way). Two things make them cheaper:

- **All tenants in one query** per series kind and span of minutes, not one per tenant: the rows carry their tenant
  (:data:`storage.incident_store.SERIES_SCHEMA`), and the scorer splits them.
- **A minute's rows are kept** once the minute ended :data:`SETTLED_NS` before the judged window: consecutive
  evaluations share all their baseline minutes but the newest, so a kept minute is not read again. A newer minute is
  read every time, since late spans (exporters' retries) and late request summaries (the trace pipeline looks back
  ``visibility_margin_s``, 5 minutes by default, for arrivals) may still change it. The trailing and the seasonal
  baseline's minutes not kept are read in one query (the request summaries' ``FINAL`` merges all of them each time).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from storage.incident_store import SERIES_SCHEMA, IncidentStore, SeriesKind
from units import NS_PER_MIN

SETTLED_NS = 5 * NS_PER_MIN
"""How long before the judged window's start a minute must have ended to be kept: the trace pipeline's default look-back
for late arrivals (``visibility_margin_s``); the judged window itself is read 20 s after it ends (``settle_s``)."""


class SeriesMinutes:
    """Per-minute series rows of every tenant (:meth:`storage.incident_store.IncidentStore.series` with
    ``tenant=None``) over spans of minutes, settled minutes kept between calls.

    Memory: the kept minutes' rows, for the spans the last call of each kind asked for (at 10 tenants x 1,800
    operation series: 18,000 rows a minute, about 55 minutes of them).

    Thread safety: none; its one caller (the anomaly scorer) serialises its evaluations.
    """

    def __init__(self, store: IncidentStore) -> None:
        self._store = store
        self._kept: dict[tuple[SeriesKind, int], pl.DataFrame] = {}

    def read(self, kind: SeriesKind, spans: Sequence[tuple[int, int]], *, settled_ns: int) -> list[pl.DataFrame]:
        """The rows of ``kind`` in each ``[start_ns, end_ns)`` of ``spans`` (disjoint), one per (tenant, series,
        minute), in no particular order. What is not kept is read in one query for two spans. Minutes that ended by
        ``settled_ns`` are kept and not read again; kept minutes of ``kind`` outside every span are forgotten. Spans
        not on whole minutes are read whole and nothing of them kept (a partial minute's rows are not that minute's).
        Raises what the store raises."""
        if any(start % NS_PER_MIN or end % NS_PER_MIN for start, end in spans):
            return [self._store.series(kind, start, end, tenant=None) for start, end in spans]
        firsts = [
            next((m for m in range(start, end, NS_PER_MIN) if (kind, m) not in self._kept), end) for start, end in spans
        ]
        read = self._fetch(kind, [(first, end) for first, (_, end) in zip(firsts, spans, strict=True) if first < end])
        by_minute = read.partition_by("bucket_ns", as_dict=True)
        used: set[tuple[SeriesKind, int]] = set()
        frames = []
        for (start, end), first in zip(spans, firsts, strict=True):
            minutes = []
            for minute in range(start, end, NS_PER_MIN):
                key = (kind, minute)
                if minute < first:
                    minutes.append(self._kept[key])
                else:
                    # A minute without rows is kept empty: it was read, not missed.
                    minutes.append(by_minute.get((minute,), read.clear()))
                    if minute + NS_PER_MIN <= settled_ns:
                        self._kept[key] = minutes[-1]
                used.add(key)
            frames.append(pl.concat(minutes) if minutes else read.clear())
        self._kept = {key: rows for key, rows in self._kept.items() if key[0] != kind or key in used}
        return frames

    def _fetch(self, kind: SeriesKind, spans: list[tuple[int, int]]) -> pl.DataFrame:
        """The per-minute rows of ``spans``, two to a query."""
        reads = [
            self._store.series(kind, *spans[i], tenant=None, also=spans[i + 1] if i + 1 < len(spans) else None)
            for i in range(0, len(spans), 2)
        ]
        return pl.concat(reads) if reads else pl.DataFrame(schema=SERIES_SCHEMA)
