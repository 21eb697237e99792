"""The stack's users: send workload requests to the gateway and time them.

Closed loop: ``concurrency`` users each send their next request as soon as the previous answer is back,
in workload order. (Open-loop replay of the trace's arrival times is issue 4.) The users are not
instrumented, so the gateway's SERVER span is the root of each trace.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from instrumented_stack.tokenizer import Tokenizer, WhitespaceTokenizer
from instrumented_stack.workload import WorkloadRequest

TENANT_HEADER = "x-tenant-id"
SAMPLE_POLICY_HEADER = "x-sample-policy"


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """One user request as the user saw it.

    Attributes:
        workload: the workload row it replayed.
        tenant_id: the tenant it was sent as.
        status: HTTP status, ``None`` when no response came back.
        latency_ms: client-side end-to-end latency in **milliseconds**.
        trace_id: the trace id the gateway reported (32 hex), ``None`` on failure.
        error: what went wrong, ``None`` on success.
    """

    workload: WorkloadRequest
    tenant_id: str
    status: int | None
    latency_ms: float
    trace_id: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        """True when the gateway answered 200."""
        return self.status == 200


async def replay(
    gateway_url: str,
    requests: Sequence[WorkloadRequest],
    *,
    concurrency: int = 1,
    tenants: Sequence[str] = ("tenant-a", "tenant-b"),
    sample_policy: str | None = None,
    tokenizer: Tokenizer | None = None,
    timeout_s: float = 300.0,
) -> list[RequestOutcome]:
    """Send ``requests`` to ``POST {gateway_url}/v1/agent`` and return their outcomes in the same order.

    Args:
        gateway_url: the gateway's root URL.
        requests: workload rows; each becomes a prompt of exactly ``prompt_tokens`` tokens asking for
            ``output_tokens`` tokens.
        concurrency: users sending at once (>= 1).
        tenants: ``x-tenant-id`` values, assigned round-robin by position (must not be empty).
        sample_policy: ``x-sample-policy`` header for every request; ``None``: not sent.
        tokenizer: makes the prompts; default :class:`WhitespaceTokenizer` (the emulator's).
        timeout_s: per-request timeout in **seconds**.

    Raises:
        ValueError: ``concurrency`` < 1 or no tenants.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if not tenants:
        raise ValueError("tenants must not be empty")
    make_prompt = tokenizer or WhitespaceTokenizer()
    outcomes: list[RequestOutcome | None] = [None] * len(requests)
    positions = iter(range(len(requests)))

    async def user(http: httpx.AsyncClient) -> None:
        for position in positions:
            row = requests[position]
            tenant = tenants[position % len(tenants)]
            headers = {TENANT_HEADER: tenant}
            if sample_policy is not None:
                headers[SAMPLE_POLICY_HEADER] = sample_policy
            body = {
                "prompt": make_prompt.synthesize(row.prompt_tokens, seed=row.index),
                "max_tokens": row.output_tokens,
            }
            outcomes[position] = await _send(http, row, tenant, headers, body)

    async with httpx.AsyncClient(base_url=gateway_url, timeout=timeout_s) as http:
        await asyncio.gather(*(user(http) for _ in range(min(concurrency, len(requests)))))
    return [outcome for outcome in outcomes if outcome is not None]


async def _send(
    http: httpx.AsyncClient,
    row: WorkloadRequest,
    tenant: str,
    headers: dict[str, str],
    body: dict[str, object],
) -> RequestOutcome:
    started = time.perf_counter()
    try:
        response = await http.post("/v1/agent", json=body, headers=headers)
    except httpx.HTTPError as error:
        latency_ms = (time.perf_counter() - started) * 1e3
        return RequestOutcome(row, tenant, None, latency_ms, None, repr(error))
    latency_ms = (time.perf_counter() - started) * 1e3
    if response.status_code != 200:
        return RequestOutcome(row, tenant, response.status_code, latency_ms, None, response.text[:200])
    return RequestOutcome(row, tenant, 200, latency_ms, response.json().get("trace_id"), None)
