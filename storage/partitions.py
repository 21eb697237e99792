"""Inserts that stay within ClickHouse's per-insert partition limit.

Every table Hotspan writes is partitioned by day (``PARTITION BY toDate(Timestamp)``, as the OpenTelemetry
Collector's ClickHouse exporter lays ``otel_traces`` out), and ClickHouse refuses an INSERT block that touches more
than ``max_partitions_per_insert_block`` partitions (default 100; error 252, ``TOO_MANY_PARTS``: "Too many
partitions for single INSERT block"). A batch that spans more days is legitimate (a buffer replayed after days
offline, devices with wrong clocks, an import of old files), and the refusal is permanent: retrying the same
batch fails the same way, forever. So a writer groups its rows by day and inserts at most that many days per
statement (the limit: :attr:`storage.clickhouse.ClickHouse.partition_limit`). Source: ClickHouse documentation,
settings, ``max_partitions_per_insert_block``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NS_PER_DAY = 86_400 * 10**9


def day_groups(days: Sequence[dt.date], limit: int) -> list[list[dt.date]]:
    """The distinct ``days`` in order, cut into groups of at most ``limit`` (all in one group when ``limit`` is 0).

    Returns:
        ``[[]]`` when there is nothing to cut (one group standing for "every row"), else the groups.
    """
    distinct = sorted(set(days))
    if limit <= 0 or len(distinct) <= limit:
        return [[]]
    return [distinct[i : i + limit] for i in range(0, len(distinct), limit)]


def split_by_day(rows: pa.Table, column: str, limit: int) -> Iterator[pa.Table]:
    """``rows`` cut into tables whose ``column`` (a timestamp) spans at most ``limit`` partitions each.

    Days are counted in UTC while ``toDate`` uses the server's time zone, in which one UTC day overlaps at most two
    dates: each table holds at most ``limit // 2`` UTC days, so at most ``limit`` dates (``limit`` 0: no cut).
    Rows keep their order within a table. Vectorised (Arrow compute); the common batch (few days) is returned whole.
    """
    per_table = max(1, limit // 2)
    if limit <= 0 or rows.num_rows == 0:
        yield rows
        return
    ns = pc.cast(rows.column(column), pa.int64()).to_numpy(zero_copy_only=False)
    days = ns // NS_PER_DAY
    distinct = np.unique(days)
    if len(distinct) <= per_table:
        yield rows
        return
    for start in range(0, len(distinct), per_table):
        chosen = distinct[start : start + per_table]
        yield rows.filter(pa.array(np.isin(days, chosen)))
