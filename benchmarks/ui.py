"""The trace page at 1k to 1M spans: server work plus first paint in headless Chromium, each over the REST fetch of
the same trace, measured side by side in one run (issue 13).

Serves Hotspan (the embedded store, its trace pipeline idle), writes one generated agent trace per size
(``tests/synthetic_traces.agent_trace``: steps of an agent calling vLLM and a database, about 20 spans each),
and per size, the median of ``--repeat`` runs of:

- **REST fetch**: ``GET /api/v1/traces/{id}``, the whole answer read (what Jaeger UI does before drawing);
- **read**: the page's storage read alone (``query.trace_view_cache.TraceViews.read``: the whole trace, or its first
  ``HOTSPAN_MAX_TRACE_SPANS`` spans above that), in process;
- **model build**: the trace page's server work when it first loads a trace, what its layout request does: the
  read, the :class:`query.trace_model.TraceView` (``query.trace_view_cache.TraceViews.load``, nothing kept), the header,
  the stage panel and the widget's starting data with the first window of rows (``dashboards.trace_panels``);
- **page ready**: the trace's first page load, in a fresh page (tab) of a browser profile that opened Hotspan
  before (its scripts in the HTTP cache, as for anyone who used the UI before), navigating to ``/ui/trace/<id>``
  until the timeline has drawn its first rows (``#trace-timeline[data-ready]`` and rows drawn): the page's HTML,
  its scripts run, the layout request (the read, the model, the first window; the read starts with the HTML
  request) and the canvas paint, until the animation frame that first shows the rows (marked in the page); one
  sample. Beside it, when Playwright's waits saw the rows, as this benchmark measured before: up to 0.5 s later
  (its polls back off to 500 ms), so that figure moves in steps;
- **reopened**: the median of the next ``--repeat`` loads of the same page, the server's model of the unchanged
  trace kept (``query.trace_view_cache``: one small query instead of the read and the analysis);
- **cold**: as reopened, in a new browser profile each time (nothing cached: every script downloaded and compiled);
- **peak RSS**: the process's peak resident memory (server, store and benchmark together) before the size's REST
  fetch and after it (it only grows, so the growth from the previous size bounds what the larger trace needed).

Every line carries the machine's load average (1, 5, 15 min) measured beside it. The last line is
``ui_trace_page_10k_over_rest_fetch: X`` (page ready, the first load, over REST fetch at 10k spans; below 1 means
the page is drawn before Jaeger's way of fetching the trace has even arrived).

Run: ``python benchmarks/ui.py [--sizes 1000,10000,100000,1000000] [--repeat 3]``. A size whose REST fetch
fails (the REST answer of a million spans is some GB of JSON) is reported as such and the page still measured.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

# Run as a script, Python puts benchmarks/ first on sys.path; the repository root takes its place, so the packages
# are this checkout's, and tests/ lends the trace generator and browser setup.
REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)
sys.path.append(str(REPO / "tests"))

from playwright.sync_api import Browser, BrowserContext, sync_playwright  # noqa: E402

from browser_kit import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from dashboards.trace_panels import header, page_meta, stage_panel  # noqa: E402
from hotspan.server import RunningServer, start_server  # noqa: E402
from hotspan.settings import load_settings  # noqa: E402
from query.trace_view_cache import TraceViews  # noqa: E402
from storage.writer import ClickHouseTraceWriter  # noqa: E402
from synthetic_traces import agent_trace  # noqa: E402

READY_TIMEOUT_MS = 600_000
REST_TIMEOUT_S = 600.0


def load() -> str:
    """The machine's load average, as ``uptime`` prints it."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def median_s(run: Callable[[], object], repeat: int) -> float:
    """Median wall-clock seconds of ``repeat`` calls of ``run``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


VIEWPORT = {"width": 1500, "height": 1100}


PAINT_WATCH = """(() => {
    new MutationObserver((records, observer) => {
        const root = document.getElementById("trace-timeline");
        if (!root || root.dataset.ready !== "1" || !(Number(root.dataset.drawn) > 0)) return;
        observer.disconnect();
        requestAnimationFrame(() => performance.mark("timeline-painted"));
    }).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ["data-ready"]});
})();"""
"""Run in the page before its scripts: marks (User Timing) the animation frame that first shows the timeline's rows,
the moment they are drawn (``assets/trace_timeline.js`` sets ``data-ready`` after drawing them)."""
PAINTED_JS = """() => {
    const mark = performance.getEntriesByName("timeline-painted")[0];
    return mark ? performance.timeOrigin + mark.startTime : null;
}"""


def page_ready_s(profile: Browser | BrowserContext, url: str) -> tuple[float, float]:
    """Seconds from navigating a fresh page to the timeline's first drawn rows: a tab of ``profile`` when it is a
    browser context (its HTTP cache shared), of a new profile (nothing cached) when it is the browser.

    Returns ``(painted, seen)``: from ``goto`` to the frame that first shows the rows, as the page marks it
    (:data:`PAINT_WATCH`; the page's clock is the epoch, as ``time.time``), and to when Playwright's waits saw them.
    ``seen`` runs late by up to half a second: Playwright polls a selector after 0, 20, 50, 100, 100, 500, 500 ...
    ms, so a paint 0.4 s after the page's ``load`` event is seen at 0.77 s."""
    page = profile.new_page(viewport=VIEWPORT) if isinstance(profile, Browser) else profile.new_page()
    try:
        page.add_init_script(PAINT_WATCH)
        started_epoch = time.time()
        started = time.perf_counter()
        page.goto(url)
        page.wait_for_selector("#trace-timeline[data-ready='1']", timeout=READY_TIMEOUT_MS)
        page.wait_for_function(
            "() => Number(document.getElementById('trace-timeline').dataset.drawn) > 0", timeout=READY_TIMEOUT_MS
        )
        seen = time.perf_counter() - started
        page.wait_for_function(PAINTED_JS, timeout=READY_TIMEOUT_MS)
        return float(page.evaluate(PAINTED_JS)) / 1000 - started_epoch, seen
    finally:
        page.close()


def median_ready(profile: Browser | BrowserContext, url: str, repeat: int) -> tuple[float, float]:
    """Medians of ``repeat`` :func:`page_ready_s` loads (painted, seen)."""
    loads = [page_ready_s(profile, url) for _ in range(repeat)]
    return statistics.median(painted for painted, _ in loads), statistics.median(seen for _, seen in loads)


def rest_fetch_s(server: RunningServer, trace_id: str, repeat: int) -> float | None:
    """Median seconds of the REST fetch of the whole trace; None when it fails (too large to answer)."""

    def fetch() -> None:
        answer = httpx.get(f"{server.base_url}/api/v1/traces/{trace_id}", timeout=REST_TIMEOUT_S)
        answer.raise_for_status()

    try:
        return median_s(fetch, repeat)
    except (httpx.HTTPError, MemoryError) as exc:
        print(f"  REST fetch failed: {type(exc).__name__}: {exc}", flush=True)
        return None


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def label(size: int) -> str:
    return f"{size // 1_000_000}M" if size >= 1_000_000 else f"{size // 1_000}k"


def page_load_work(server: RunningServer, trace_id: str) -> int:
    """What the trace page's layout request does on the server (``dashboards.pages.trace``) the first time it loads a
    trace (nothing kept); returns the spans."""
    view = TraceViews(server.storage.reader).load(trace_id, tenant=None)
    assert view is not None
    header(view)
    stage_panel(view)
    page_meta(view, "benchmark")
    return view.size


def measure(server: RunningServer, browser: Browser, warm: BrowserContext, size: int, repeat: int) -> float | None:
    """Write one trace of about ``size`` spans, print its figures; returns page ready / REST fetch (None when the
    REST fetch failed)."""
    trace_id = f"{size:032x}"
    started = time.perf_counter()
    ClickHouseTraceWriter(server.storage.clickhouse).write(agent_trace(size, trace_id=trace_id))
    print(f"{label(size)}: {size:,} spans asked, written in {time.perf_counter() - started:.1f} s", flush=True)
    # The REST fetch goes last: its answer is millions of Python objects at 1M spans, whose collection would
    # otherwise land in the figures measured after it.
    read = median_s(lambda: TraceViews(server.storage.reader).read(trace_id, tenant=None), repeat)
    build = median_s(lambda: page_load_work(server, trace_id), repeat)
    build_load = load()
    spans = page_load_work(server, trace_id)
    url = f"{server.base_url}/ui/trace/{trace_id}"
    ready, seen = page_ready_s(warm, url)
    ready_load = load()
    again, again_seen = median_ready(warm, url, repeat)
    again_load = load()
    cold, cold_seen = median_ready(browser, url, repeat)
    cold_load = load()
    page_rss = peak_rss_mb()
    gc.collect()
    rest = rest_fetch_s(server, trace_id, repeat)
    rest_load = load()
    gc.collect()
    print(f"trace_page_ready_{label(size)}_s: {ready:.3f} ({ready_load}); {spans:,} spans", flush=True)
    print(f"  seen by Playwright's polls {seen:.3f} s", flush=True)
    print(f"  reopened (model kept) {again:.3f} s, seen {again_seen:.3f} s ({again_load})", flush=True)
    print(f"  cold (new profile, model kept) {cold:.3f} s, seen {cold_seen:.3f} s ({cold_load})", flush=True)
    print(f"  REST fetch {f'{rest:.3f} s ({rest_load})' if rest is not None else 'failed'}", flush=True)
    print(
        f"  model build {build:.3f} s, of which read {read:.3f} s ({build_load}); peak RSS {page_rss:,.0f} MB "
        f"before the REST fetch, {peak_rss_mb():,.0f} MB after it",
        flush=True,
    )
    if rest is None:
        return None
    print(f"  page ready / REST fetch: {ready / rest:.3f}", flush=True)
    print(f"  model build / REST fetch: {build / rest:.3f}", flush=True)
    return ready / rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000", help="spans per trace, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median is reported)")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    ratios: dict[int, float | None] = {}
    with tempfile.TemporaryDirectory(prefix="hotspan-ui-bench-") as data_dir:
        # The trace pipeline would analyse the written traces in the background while the clock runs: idle it.
        settings = load_settings(data_dir=data_dir, http_port=0, grpc_port=-1, trace_idle_s=10**9)
        server = start_server(settings)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                small = "0" * 31 + "1"
                ClickHouseTraceWriter(server.storage.clickhouse).write(agent_trace(100, trace_id=small))
                warm = browser.new_context(viewport=VIEWPORT)
                page_ready_s(warm, f"{server.base_url}/ui/trace/{small}")  # fills the profile's cache
                for size in sizes:
                    ratios[size] = measure(server, browser, warm, size, args.repeat if size <= 100_000 else 1)
                warm.close()
                browser.close()
        finally:
            server.stop()
    if ratios.get(10_000) is not None:
        print(f"ui_trace_page_10k_over_rest_fetch: {ratios[10_000]:.3f}")


if __name__ == "__main__":
    main()
