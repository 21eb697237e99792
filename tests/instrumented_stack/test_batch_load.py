"""The batch client's schedule: a rate rising linearly to its cap, then steady."""

from __future__ import annotations

import pytest

from instrumented_stack.batch_load import BatchLoadConfig, send_offset_s


def test_the_rate_ramps_then_holds() -> None:
    config = BatchLoadConfig(rate_per_s_per_s=8.0, max_rate_per_s=40.0)
    # r(t) = 8 t: the 4th request is due when 4 t^2 = 4, at 1 s; the cap (40/s) comes at 5 s, after 100 requests.
    assert send_offset_s(config, 4) == pytest.approx(1.0)
    assert send_offset_s(config, 100) == pytest.approx(5.0)
    assert send_offset_s(config, 140) - send_offset_s(config, 100) == pytest.approx(1.0)
    offsets = [send_offset_s(config, n) for n in range(1, 200)]
    assert offsets == sorted(offsets)
