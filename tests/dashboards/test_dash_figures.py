"""The shared figure basics (``dashboards.figures``): the "nothing to draw" figure and the search scatter."""

from __future__ import annotations

import polars as pl
from span_frames import T0_NS

from dashboards.figures import empty_figure, search_scatter_figure


def test_an_empty_figure_says_why() -> None:
    figure = empty_figure("No <b>spans</b>")
    assert figure.layout.annotations[0].text == "No &lt;b&gt;spans&lt;/b&gt;"
    assert not figure.data


def test_search_scatter() -> None:
    summaries = pl.DataFrame(
        {
            "trace_id": ["a" * 32, "b" * 32],
            "root_service": ["gw", "gw"],
            "root_name": ["GET /", "POST /chat"],
            "start_time_unix_nano": [T0_NS, T0_NS + 1_000_000_000],
            "duration_ns": [5_000_000, 12_000_000],
            "span_count": [3, 30],
            "service_count": [1, 3],
            "error_count": [0, 2],
        }
    )
    (dots,) = search_scatter_figure(summaries).data
    assert list(dots.y) == [5.0, 12.0]
    assert [d[0] for d in dots.customdata] == ["a" * 32, "b" * 32]
    assert dots.marker.size[1] > dots.marker.size[0]
    assert search_scatter_figure(summaries.clear()).layout.annotations
