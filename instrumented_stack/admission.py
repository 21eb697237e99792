"""SLA-aware admission for the gateway: priority tiers, a bounded number of requests in flight, early 429s.

Each request belongs to a tier, ``P0`` (most urgent) to ``P2``; each tier has an SLA, the longest it may
wait for a slot (**seconds**). At most ``max_in_flight`` requests are in flight; the rest queue, served by
tier first and arrival order within a tier (``order="priority"``), or in arrival order whatever their tier
(``order="fifo"``: tiers then only differ by their SLA).

On arrival the controller estimates the request's wait: with ``a`` requests queued ahead of it (of the same or
a more urgent tier; with ``fifo`` all of them) and ``f`` free slots,
``max(0, a + 1 - f) * mean_service_s / max_in_flight``, where
``mean_service_s`` is an exponentially weighted mean of recent in-flight durations (starting at
``initial_service_s``). When the estimate exceeds the tier's SLA the request is rejected at once
(:class:`AdmissionRejected`, the gateway's 429) instead of queueing past its deadline.

Use from one asyncio event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass
from typing import Literal

Tier = Literal["P0", "P1", "P2"]
TIER_RANK: dict[str, int] = {"P0": 0, "P1": 1, "P2": 2}
AdmissionOrder = Literal["priority", "fifo"]


@dataclass(frozen=True, slots=True)
class AdmissionRejected(Exception):
    """The tier's SLA would be broken: ``estimated_wait_s`` > ``sla_s`` with ``queue_depth`` queued ahead."""

    tier: str
    estimated_wait_s: float
    sla_s: float
    queue_depth: int

    def __str__(self) -> str:
        return (
            f"tier {self.tier}: estimated queue wait {self.estimated_wait_s:.3f} s exceeds its SLA of "
            f"{self.sla_s:.3f} s ({self.queue_depth} requests ahead)"
        )


@dataclass(frozen=True, slots=True)
class Admission:
    """An admitted request: its ``estimated_wait_s`` on arrival and ``wait_s`` actually spent queued."""

    tier: str
    estimated_wait_s: float
    wait_s: float


class AdmissionController:
    """See the module docstring.

    Args:
        max_in_flight: requests in flight at once (>= 1).
        sla_s: per-tier SLA in **seconds**.
        initial_service_s: the mean service time assumed before any request finished (**seconds**).
        smoothing: weight of the newest duration in the mean (0 < smoothing <= 1).
        order: ``priority`` (urgent tiers first) or ``fifo`` (arrival order).

    Raises:
        ValueError: an argument out of range or a tier without SLA.
    """

    def __init__(
        self,
        max_in_flight: int,
        sla_s: dict[str, float],
        initial_service_s: float = 1.0,
        smoothing: float = 0.2,
        order: AdmissionOrder = "priority",
    ) -> None:
        if max_in_flight < 1 or not 0 < smoothing <= 1 or initial_service_s < 0:
            raise ValueError("max_in_flight >= 1, 0 < smoothing <= 1 and initial_service_s >= 0 are required")
        missing = set(TIER_RANK) - set(sla_s)
        if missing:
            raise ValueError(f"no SLA for tier(s) {sorted(missing)}")
        self._max_in_flight = max_in_flight
        self._sla_s = dict(sla_s)
        self._mean_service_s = initial_service_s
        self._smoothing = smoothing
        self._by_tier = order == "priority"
        self._in_flight = 0
        self._queue: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def estimate_wait_s(self, tier: str) -> tuple[float, int]:
        """``(estimated wait in seconds, requests queued ahead)`` for a request of ``tier`` arriving now."""
        rank = self._rank(tier)
        ahead = sum(1 for queued_rank, _, future in self._queue if queued_rank <= rank and not future.done())
        free = self._max_in_flight - self._in_flight
        return max(0, ahead + 1 - free) * self._mean_service_s / self._max_in_flight, ahead

    async def admit(self, tier: str) -> Admission:
        """Wait for a slot; raise :class:`AdmissionRejected` at once when the wait would break the SLA.

        The caller must call :meth:`release` when the admitted request ends. Raises ``KeyError`` for an
        unknown tier.
        """
        loop = asyncio.get_running_loop()
        # Entries of cancelled waiters would otherwise make a free slot look taken.
        self._queue = [entry for entry in self._queue if not entry[2].done()]
        heapq.heapify(self._queue)
        estimate, ahead = self.estimate_wait_s(tier)
        sla = self._sla_s[tier]
        if estimate > sla:
            raise AdmissionRejected(tier, estimate, sla, ahead)
        arrived = loop.time()
        if self._in_flight < self._max_in_flight and not self._queue:
            self._in_flight += 1
            return Admission(tier, estimate, 0.0)
        future: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._queue, (self._rank(tier), next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                # The slot was handed over just before the cancel: pass it on.
                self._hand_over()
            raise
        return Admission(tier, estimate, loop.time() - arrived)

    def _rank(self, tier: str) -> int:
        """Where ``tier`` queues: its rank, or 0 for every tier in arrival order. ``KeyError`` for an unknown one."""
        rank = TIER_RANK[tier]
        return rank if self._by_tier else 0

    def release(self, service_s: float) -> None:
        """An admitted request ended after ``service_s`` **seconds** in flight; its slot goes to the next."""
        self._mean_service_s += self._smoothing * (service_s - self._mean_service_s)
        self._hand_over()

    def _hand_over(self) -> None:
        while self._queue:
            _, _, future = heapq.heappop(self._queue)
            if not future.done():
                future.set_result(None)
                return
        self._in_flight -= 1
