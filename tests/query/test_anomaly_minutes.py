"""The anomaly baselines' minutes (:class:`query.anomaly_minutes.SeriesMinutes`) over a recording store: the rows of
each span are what the store holds; the next minute's evaluation reads only the minutes not settled and the new one,
the trailing and the seasonal span in one query; a settled minute is not read again, a newer one is (late rows
count); minutes no span uses are forgotten. The store's own all-tenant read is checked on real data in
``tests/diagnosis/test_anomaly_incidents.py``."""

from __future__ import annotations

from typing import Any

import polars as pl

from query.anomaly_minutes import SETTLED_NS, SeriesMinutes
from storage.incident_store import SERIES_SCHEMA, SeriesKind
from units import NS_PER_DAY, NS_PER_MIN

WINDOW = 2_000 * NS_PER_MIN
"""The judged window's start; the trailing baseline is the 30 minutes before it, the seasonal one a day earlier."""
ORDER = ["tenant", "service", "name", "span_kind", "bucket_ns"]


class RecordingStore:
    """Per-minute series rows of two tenants, one series each, answered as :meth:`IncidentStore.series` does; records
    each read's spans."""

    def __init__(self) -> None:
        self.rows = pl.DataFrame(
            [
                {"tenant": tenant, "service": "s", "name": "op", "span_kind": "Server", "bucket_ns": minute}
                | {"calls": 10, "errors": 0, "p95_ns": float(minute % 7)}
                for tenant in ("a", "b")
                for start in (WINDOW - NS_PER_DAY - 15 * NS_PER_MIN, WINDOW - 30 * NS_PER_MIN)
                for minute in range(start, start + 32 * NS_PER_MIN, NS_PER_MIN)
            ],
            schema=SERIES_SCHEMA,
        )
        self.reads: list[list[tuple[int, int]]] = []

    def series(self, kind: SeriesKind, start_ns: int, end_ns: int, **read: Any) -> pl.DataFrame:
        assert read["tenant"] is None and not read.get("whole")
        spans = [(start_ns, end_ns), *([read["also"]] if read.get("also") else [])]
        self.reads.append(spans)
        return pl.concat([self.rows.filter(pl.col("bucket_ns").is_between(s, e, closed="left")) for s, e in spans])

    def late_row(self, minute: int) -> None:
        """Doubles the calls of ``minute`` (late spans arriving)."""
        self.rows = self.rows.with_columns(
            pl.when(pl.col("bucket_ns") == minute).then(pl.col("calls") * 2).otherwise(pl.col("calls")).alias("calls")
        )


def spans(window: int) -> list[tuple[int, int]]:
    """The trailing and the seasonal baseline of the window starting at ``window``."""
    seasonal = window - NS_PER_DAY - 15 * NS_PER_MIN
    return [(window - 30 * NS_PER_MIN, window), (seasonal, seasonal + 31 * NS_PER_MIN)]


def read(minutes: SeriesMinutes, window: int) -> list[pl.DataFrame]:
    return minutes.read("operation", spans(window), settled_ns=window - SETTLED_NS)


def same(found: list[pl.DataFrame], store: RecordingStore, window: int) -> bool:
    """Whether ``found`` holds the store's rows of each span of ``window``, in any order."""
    wanted = [store.rows.filter(pl.col("bucket_ns").is_between(s, e, closed="left")) for s, e in spans(window)]
    if len(found) != len(wanted):
        return False
    return all(f.sort(ORDER).equals(w.sort(ORDER)) for f, w in zip(found, wanted, strict=True))


def test_the_rows_are_the_stores_and_the_next_minute_reads_only_what_has_not_settled() -> None:
    store = RecordingStore()
    minutes = SeriesMinutes(store)  # type: ignore[arg-type]
    first = read(minutes, WINDOW)
    assert store.reads == [spans(WINDOW)] and same(first, store, WINDOW)
    assert [frame.height for frame in first] == [60, 62]

    store.reads.clear()
    nxt = WINDOW + NS_PER_MIN
    assert same(read(minutes, nxt), store, nxt)
    # One query: the trailing span's minutes that had not settled a minute ago and the new one, the seasonal span's
    # new minute.
    seasonal_new = nxt - NS_PER_DAY + 15 * NS_PER_MIN
    assert store.reads == [[(WINDOW - SETTLED_NS, nxt), (seasonal_new, seasonal_new + NS_PER_MIN)]]


def test_late_rows_count_until_their_minute_settles() -> None:
    store = RecordingStore()
    minutes = SeriesMinutes(store)  # type: ignore[arg-type]
    read(minutes, WINDOW)
    unsettled, settled = WINDOW - NS_PER_MIN, WINDOW - SETTLED_NS - NS_PER_MIN
    store.late_row(unsettled)
    store.late_row(settled)
    trailing, _ = read(minutes, WINDOW + NS_PER_MIN)
    calls = dict(trailing.filter(pl.col("tenant") == "a").select("bucket_ns", "calls").iter_rows())
    assert calls[unsettled] == 20
    assert calls[settled] == 10, "a settled minute is kept as first read"


def test_minutes_no_span_uses_are_forgotten_and_spans_off_whole_minutes_are_read_whole() -> None:
    store = RecordingStore()
    minutes = SeriesMinutes(store)  # type: ignore[arg-type]
    read(minutes, WINDOW)
    read(minutes, WINDOW + 60 * NS_PER_MIN)
    store.reads.clear()
    assert same(read(minutes, WINDOW), store, WINDOW)
    assert store.reads == [spans(WINDOW)], "the first window's minutes were forgotten, so read again"

    store.reads.clear()
    odd = (WINDOW - 10 * NS_PER_MIN + NS_PER_MIN // 2, WINDOW)
    (rows,) = minutes.read("operation", [odd], settled_ns=WINDOW)
    assert store.reads == [[odd]] and rows.height == 2 * 9
