"""What tail sampling costs the trace pipeline on a large store: the policies, and the deletes of dropped traces.

Builds a store of ``--spans`` background spans (``benchmarks/dedup.py``'s generator: traces of 20 spans over 5
services, spread over a day) and empties the pipeline's work list; then, four times, adds a group of ``--traces``
fresh traces of 20 spans each at the start of that day and analyses it with one forced poll, alternately without and
with the policies ``status_code: ERROR`` and ``probabilistic: 10 %`` (every 50th span of the generator is an error,
so 2 traces in 5 hold one: about 45 % are kept, the rest deleted at the end of the poll by lightweight ``DELETE``s of
up to 5,000 traces each). Prints each poll's wall time, the time spent deleting and the traces dropped, and checks
that their spans are gone and the RED rollup unchanged; the last line is ``tail_sampling_poll_ratio: X.XX`` (the
polls with sampling over those without, summed). Run: ``python benchmarks/tail_sampling.py [--spans 1000000]
[--traces 2000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)

POLICIES = {
    "policies": [
        {"name": "errors", "type": "status_code", "status_code": {"status_codes": ["ERROR"]}},
        {"name": "baseline", "type": "probabilistic", "probabilistic": {"sampling_percentage": 10}},
    ]
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000, help="background spans in the store (default 1000000)")
    parser.add_argument("--traces", type=int, default=2_000, help="fresh traces per group (default 2000)")
    args = parser.parse_args()

    from analysis import STAGES
    from benchmarks.dedup import BASE_NS, DAY_NS, GENERATE
    from processors.pipeline.config import TracePipelineConfig
    from processors.pipeline.tail_sampling import TailSampler
    from processors.pipeline.tail_sampling_policies import parse_tail_sampling
    from processors.pipeline.trace_pipeline import TracePipeline
    from storage import trace_sql
    from storage.analysis_store import ClickHouseAnalysisStore
    from storage.clickhouse import ClickHouse
    from storage.migrations import apply_migrations
    from storage.reader import ClickHouseTraceReader

    class TimedStore(ClickHouseAnalysisStore):
        """The pipeline's store, timing its deletes."""

        deleting_s = 0.0
        deletes = 0

        def drop_traces(self, owner: str, trace_ids: Sequence[str], start_ns: int, end_ns: int) -> None:
            started = time.perf_counter()
            super().drop_traces(owner, trace_ids, start_ns, end_ns)
            self.deleting_s += time.perf_counter() - started
            self.deletes += 1

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    data_dir = Path(tempfile.mkdtemp(prefix="hotspan-tail-"))
    ch = ClickHouse(f"chdb://{data_dir / 'clickhouse'}", f"tail_{uuid.uuid4().hex[:8]}")
    apply_migrations(ch)
    generate = GENERATE.replace("COLUMNS", trace_sql.STORED_COLUMNS).replace(
        "FROM numbers({rows:UInt64})", "FROM numbers({offset:UInt64}, {rows:UInt64})"
    )
    started = time.perf_counter()
    spacing = DAY_NS // max(1, args.spans // 20)
    ch.command(generate, {"base": BASE_NS, "spacing": spacing, "offset": 0, "rows": args.spans})
    ch.command("TRUNCATE TABLE hotspan_trace_arrivals")
    print(f"store: {args.spans:,} background spans built in {time.perf_counter() - started:.0f} s")

    # A warm-up group first (caches, the first rolling-quantile read), so neither measured poll pays for it.
    warm_up = args.traces // 10 * 20
    ch.command(generate, {"base": BASE_NS, "spacing": 1_000_000, "offset": args.spans, "rows": warm_up})
    TracePipeline(
        ClickHouseAnalysisStore(ch, STAGES), ClickHouseTraceReader(ch), TracePipelineConfig(trace_idle_s=0)
    ).run_once(force=True)
    group_spans = args.traces * 20
    polls: dict[bool, list[float]] = {False: [], True: []}
    dropped = 0
    sampler = TailSampler(parse_tail_sampling(POLICIES))
    for number, sampling in enumerate((False, True, False, True)):
        offset = args.spans + warm_up + number * group_spans
        ch.command(generate, {"base": BASE_NS, "spacing": 1_000_000, "offset": offset, "rows": group_spans})
        red_before = ch.query_rows("SELECT sum(Calls), sum(Errors) FROM hotspan_red_minutes")
        store = TimedStore(ch, STAGES)
        config = TracePipelineConfig(trace_idle_s=0)
        pipeline = TracePipeline(store, ClickHouseTraceReader(ch), config, sampler=sampler if sampling else None)
        started = time.perf_counter()
        result = pipeline.run_once(force=True)
        polls[sampling].append(time.perf_counter() - started)
        assert result.analysed == args.traces, result
        dropped += result.dropped
        stored = int(ch.query_rows("SELECT count() FROM otel_traces")[0][0])
        expected = args.spans + warm_up + (number + 1) * group_spans - 20 * dropped
        assert stored == expected, (stored, expected)
        assert ch.query_rows("SELECT sum(Calls), sum(Errors) FROM hotspan_red_minutes") == red_before
        label = "with tail sampling:   " if sampling else "without tail sampling:"
        took = polls[sampling][-1]
        print(
            f"{label} {args.traces:,} traces in {took:.2f} s ({args.traces / took:,.0f} traces/s),"
            f" {result.batches} batches, {result.dropped:,} dropped,"
            f" {store.deleting_s:.2f} s in {store.deletes} DELETE(s)"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"tail_sampling_poll_ratio: {sum(polls[True]) / sum(polls[False]):.2f}")


if __name__ == "__main__":
    main()
