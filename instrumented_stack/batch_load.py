"""A batch client beside the stack's users: a low-priority tenant whose request rate keeps rising.

While the stack is open, :class:`BatchLoad` sends ``POST /v1/agent`` as ``tenant`` (whose API key gives it its
tier, P2 in the demo tenants) open loop: the rate grows linearly, ``rate_per_s_per_s`` more requests per second
every second from 0, up to ``max_rate_per_s``, the way a backfill or evaluation job ramps up, until it has sent
``max_requests``; with ``after_requests`` the clock starts when the gateway has had that many requests
(its ``/metrics``), so the job joins the users' traffic however long they took to start. Answers are read
and dropped (429s included: the gateway refuses what its SLA cannot hold). Like the users it is not
instrumented, so each request is a trace rooted at the gateway. It runs on its own thread and event loop;
:meth:`BatchLoad.stop` stops sending and waits for the requests in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.loadgen import TENANT_HEADER, TenantCredentials


class BatchLoadConfig(BaseModel):
    """What the batch client sends, and how fast."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = Field(default="tenant-b", description="tenant it sends as (its API key sets the tier)")
    prompt: str = Field(
        default="Summarise yesterday's catalogue changes for the weekly report.",
        min_length=1,
        description="prompt; each request appends its item number",
    )
    max_tokens: int = Field(default=16, ge=1, description="answer length in tokens")
    start_after_s: float = Field(default=0.0, ge=0, description="first request this long after the start, seconds")
    after_requests: int = Field(
        default=0,
        ge=0,
        description="the start is when the gateway has had this many requests (the users'), not when the client "
        "starts (0): on a busy host the users' first requests can come a second after the stack opens, and an "
        "open-loop replay's first rows can be seconds apart",
    )
    rate_per_s_per_s: float = Field(default=8.0, gt=0, description="growth of the request rate, requests/s per s")
    max_rate_per_s: float = Field(default=40.0, gt=0, description="the rate stops growing here, requests/s")
    max_requests: int = Field(default=1_000, ge=1, description="the job's size: it stops after this many requests")
    timeout_s: float = Field(default=60.0, gt=0, description="per-request timeout, seconds")


def send_offset_s(config: BatchLoadConfig, n: int) -> float:
    """When the ``n``-th request (from 1) is due, **seconds** after the start: with the rate ``r(t) = a t``
    (``a`` = ``rate_per_s_per_s``) it is due when ``a t^2 / 2 = n``, until the rate reaches ``max_rate_per_s``
    (at ``t_max = max / a``); after that one every ``1 / max`` seconds."""
    growth, peak = config.rate_per_s_per_s, config.max_rate_per_s
    ramp_s = peak / growth
    ramp_count = growth * ramp_s**2 / 2
    return math.sqrt(2 * n / growth) if n <= ramp_count else ramp_s + (n - ramp_count) / peak


GATEWAY_POLL_S = 0.005
"""How often the gateway's ``/metrics`` is read while waiting for its first request, seconds."""
GATEWAY_REQUESTS = "gateway_requests_total"
"""The gateway's request counter (``instrumented_stack.gateway``)."""


class BatchLoad:
    """The batch client of one stack. Not reusable: :meth:`start` once, :meth:`stop` once.

    Args:
        config: what to send and how fast.
        gateway_url: root URL of the gateway.
        credentials: the tenant's credentials (a key when the gateway checks them).
    """

    def __init__(self, config: BatchLoadConfig, gateway_url: str, credentials: TenantCredentials) -> None:
        self._config = config
        self._gateway_url = gateway_url
        self._headers = (
            {"authorization": f"Bearer {credentials.api_key}"}
            if credentials.api_key
            else {TENANT_HEADER: credentials.tenant_id}
        )
        self._loop = asyncio.new_event_loop()
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="stack-batch-load", daemon=True)
        self.sent = 0
        """Requests sent so far."""
        self.statuses: dict[int, int] = {}
        """Answers by HTTP status."""

    def start(self) -> None:
        """Start sending, on a thread of its own."""
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop sending and wait at most ``timeout_s`` **seconds** for the requests in flight (then cancel them)."""
        stopping = self._stopping
        if stopping is not None:
            # The job may have sent everything and closed its loop already: then there is nothing to stop.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._send_all())
        finally:
            self._loop.close()

    async def _send_all(self) -> None:
        self._stopping = asyncio.Event()
        config = self._config
        async with httpx.AsyncClient(base_url=self._gateway_url, timeout=config.timeout_s) as http:
            if config.after_requests:
                await self._gateway_requests(http, config.after_requests)
            started = self._loop.time() + config.start_after_s
            in_flight: set[asyncio.Task[None]] = set()
            for n in range(1, config.max_requests + 1):
                delay = started + send_offset_s(config, n) - self._loop.time()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), max(0.0, delay))
                if self._stopping.is_set():
                    break
                # Each item of the job asks about its own item, as a batch job's prompts do.
                body = {"prompt": f"{config.prompt} Item {n}.", "max_tokens": config.max_tokens}
                task = asyncio.create_task(self._send(http, body))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            if in_flight:
                await asyncio.wait(in_flight, timeout=config.timeout_s)

    async def _gateway_requests(self, http: httpx.AsyncClient, count: int) -> None:
        """Return once the gateway has had ``count`` requests (or :meth:`stop` was called)."""
        assert self._stopping is not None
        while not self._stopping.is_set():
            with contextlib.suppress(httpx.HTTPError):
                response = await http.get("/metrics")
                if response.status_code == 200 and _requests(response.text) >= count:
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), GATEWAY_POLL_S)

    async def _send(self, http: httpx.AsyncClient, body: dict[str, object]) -> None:
        self.sent += 1
        try:
            response = await http.post("/v1/agent", json=body, headers=self._headers)
        except httpx.HTTPError:
            status = 0
        else:
            status = response.status_code
        self.statuses[status] = self.statuses.get(status, 0) + 1


def _requests(exposition: str) -> float:
    """:data:`GATEWAY_REQUESTS` summed over its labels, from a Prometheus exposition."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == GATEWAY_REQUESTS
    )
