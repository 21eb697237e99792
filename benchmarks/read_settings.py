"""What a read's settings cost on the embedded engine: in the query's own ``SETTINGS`` clause
(``storage.clickhouse.with_settings``, Hotspan's way) against clickhouse-connect's chDB backend applying them with
``SET`` statements around the query (a read of ``system.settings``, one ``SET`` per setting before and one after),
which is how Hotspan's Arrow reads ran before.

The store: ``--spans`` generated spans of ``queries.py`` (traces of 10 spans over 20 services, a day), small as a
new user's. The reads go through Hotspan's reader on a handle with the query room's default budget
(``ReadBudget``: ``max_execution_time`` and ``max_memory_usage``), as the REST, Jaeger and Tempo routes read; a search
adds its own two (``max_result_rows``, ``result_overflow_mode``). The dependencies are the control: their rows come
through the driver's ``query``, which writes settings into the query itself either way. Each read runs both ways in
turn, ``--repeats`` times (one warm-up each); the median of each, ms, with the 1-minute load average beside. Last line
``settings_in_query_speedup: X.XX``: the search's median the driver's way over Hotspan's.

Run: ``python benchmarks/read_settings.py [--spans 20000] [--repeats 200]`` (under a minute on two shared cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)
sys.path.append(str(REPO / "tests"))

from benchmarks.queries import BASE_NS, DAY_NS, HOUR_NS, load  # noqa: E402
from storage.clickhouse import ClickHouse, ReadBudget  # noqa: E402
from storage.reader import ClickHouseTraceReader, TraceQuery  # noqa: E402


class DriverSettings(ClickHouse):
    """A handle whose Arrow reads hand their settings to the driver, which sets them around the query: the reads
    before ``with_settings``."""

    def query_arrow(
        self, sql: str, parameters: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None
    ) -> pa.Table:
        every = {**self._settings, **(settings or {})}
        with self._lock:
            return self._client.query_arrow(sql, parameters=dict(parameters or {}), settings=every, use_strings=True)


def interleaved_ms(runs: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median wall time of each of ``runs``, ms: one warm-up each, then ``repeats`` rounds running each once."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(repeats):
        for label, run in runs.items():
            started = time.perf_counter()
            run()
            times[label].append((time.perf_counter() - started) * 1000)
    return {label: statistics.median(spent) for label, spent in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000, help="spans in the store (default 20000)")
    parser.add_argument("--repeats", type=int, default=200, help="rounds per read (default 200)")
    args = parser.parse_args()

    from cluster_kit import open_engine

    from storage.migrations import apply_migrations

    directory = Path(tempfile.mkdtemp(prefix="read-settings-")) / "chdb"
    directory.mkdir()
    dsn = open_engine(directory)
    ch = ClickHouse(dsn, "bench")
    apply_migrations(ch)
    load(ch, args.spans, lambda table: table)
    hotspan = ClickHouseTraceReader(ch.budgeted(ReadBudget()))
    driver = ClickHouseTraceReader(DriverSettings(dsn, "bench").budgeted(ReadBudget()))
    trace_id = ch.query_rows("SELECT any(TraceId) FROM otel_traces")[0][0]
    middle = BASE_NS + DAY_NS // 2
    search = TraceQuery(service="svc-3", start_ns=middle, end_ns=middle + HOUR_NS, limit=20)

    reads: dict[str, Callable[[ClickHouseTraceReader], object]] = {
        "search 1 h, 20 traces": lambda reader: reader.search(search, tenant="default"),
        "trace by ID": lambda reader: reader.trace(trace_id, tenant="default"),
        "dependencies 1 h": lambda reader: reader.dependencies(middle, middle + HOUR_NS, tenant="default"),
    }
    print(f"{args.spans:,} spans, {args.repeats} rounds; ms, median")
    speedup = 0.0
    for label, read in reads.items():
        medians = interleaved_ms({"hotspan": partial(read, hotspan), "driver": partial(read, driver)}, args.repeats)
        ratio = medians["driver"] / medians["hotspan"]
        speedup = speedup or ratio
        print(
            f"{label:24s} in the query {medians['hotspan']:7.2f}   through SET {medians['driver']:7.2f}"
            f"   x{ratio:.2f}   load {os.getloadavg()[0]:.2f}"
        )
    print(f"settings_in_query_speedup: {speedup:.2f}")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
