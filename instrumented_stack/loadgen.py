"""The stack's users: send prompts to the gateway, open loop or closed loop, and time them.

- **Open loop** (:func:`replay_open_loop`): request *i* is sent at ``arrival_offset_s / rate_scale`` seconds
  after the start, whether or not earlier ones were answered - the trace's arrival process, sped up
  ``rate_scale`` times.
- **Closed loop** (:func:`replay_closed_loop`): ``users`` users each send their next prompt as soon as the
  previous answer is back, in prompt order.

Both stop sending at ``duration_s`` (when given) and wait for what was sent. Users are not instrumented,
so the gateway's SERVER span is the root of each trace. Tenants are assigned round-robin by position; a
tenant with an API key sends ``Authorization: Bearer <key>``, one without sends ``x-tenant-id``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from instrumented_stack.prompts import PromptBuilder, UserPrompt
from instrumented_stack.workload import WorkloadRequest

TENANT_HEADER = "x-tenant-id"
SAMPLE_POLICY_HEADER = "x-sample-policy"


@dataclass(frozen=True, slots=True)
class TenantCredentials:
    """Who a user sends as: ``tenant_id`` and, when the gateway checks keys, its ``api_key``."""

    tenant_id: str
    api_key: str | None = None


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """One user request as the user saw it.

    Attributes:
        workload: the workload row it replayed.
        intent: the intent its question was drawn for.
        tenant_id: the tenant it was sent as.
        status: HTTP status, ``None`` when no response came back.
        latency_ms: client-side end-to-end latency in **milliseconds**.
        sent_unix_ns: when it was sent, **nanoseconds** since the Unix epoch.
        trace_id: the trace id the gateway reported (32 hex), ``None`` on failure.
        error: what went wrong, ``None`` on success.
    """

    workload: WorkloadRequest
    intent: str
    tenant_id: str
    status: int | None
    latency_ms: float
    sent_unix_ns: int
    trace_id: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        """True when the gateway answered 200."""
        return self.status == 200


Progress = Callable[[int, int, int], None]
"""Called after each answer with ``(answered, errors, total planned)``."""


@dataclass(frozen=True, slots=True)
class UserSettings:
    """What every request carries: ``tenants`` round-robin (not empty), ``sample_policy`` header (``None``:
    not sent), the per-request ``timeout_s`` in **seconds**, an optional ``progress`` callback, and the user
    session it is a turn of: each tenant's requests, in prompt order, in sessions of ``conversation_turns``
    (0: none named), sent as the body's ``conversation_id`` (the agent's ``gen_ai.conversation.id``)."""

    tenants: Sequence[TenantCredentials]
    sample_policy: str | None = None
    timeout_s: float = 300.0
    progress: Progress | None = None
    conversation_turns: int = 3

    def session(self, position: int) -> tuple[int, int] | None:
        """The user session request ``position`` (its place in the replay, from 0) is a turn of, as
        ``(tenant index, session number)``; None when ``conversation_turns`` < 1. Build the replay's prompts
        with it (:meth:`instrumented_stack.prompts.PromptBuilder.build`) so a session's turns resend one history,
        as a conversation's do."""
        if self.conversation_turns < 1:
            return None
        tenants = len(self.tenants)
        return position % tenants, position // (tenants * self.conversation_turns)


def replay_prompts(builder: PromptBuilder, rows: Sequence[WorkloadRequest], settings: UserSettings) -> list[UserPrompt]:
    """The prompts of ``rows`` replayed in this order under ``settings``: each built as a turn of its user session
    (:meth:`UserSettings.session`), so the turns of one conversation resend one history."""
    return [builder.build(row, settings.session(position)) for position, row in enumerate(rows)]


class _Sender:
    def __init__(self, http: httpx.AsyncClient, settings: UserSettings, total: int) -> None:
        if not settings.tenants:
            raise ValueError("tenants must not be empty")
        self._http = http
        self._settings = settings
        self._total = total
        self._answered = 0
        self._errors = 0
        # Sessions of one replay are its own: another replay into the same store names different conversations.
        self._replay = uuid.uuid4().hex[:8]

    def conversation(self, position: int) -> str | None:
        """The user session (:class:`UserSettings`) request ``position`` is a turn of; None when none is named."""
        session = self._settings.session(position)
        if session is None:
            return None
        tenant, number = session
        return f"{self._replay}-{self._settings.tenants[tenant].tenant_id}-{number}"

    async def send(self, position: int, prompt: UserPrompt) -> RequestOutcome:
        settings = self._settings
        tenant = settings.tenants[position % len(settings.tenants)]
        headers = {"authorization": f"Bearer {tenant.api_key}"} if tenant.api_key else {TENANT_HEADER: tenant.tenant_id}
        if settings.sample_policy is not None:
            headers[SAMPLE_POLICY_HEADER] = settings.sample_policy
        body: dict[str, object] = {"prompt": prompt.prompt, "max_tokens": prompt.row.output_tokens}
        if (conversation := self.conversation(position)) is not None:
            body["conversation_id"] = conversation
        sent_ns = time.time_ns()
        started = time.perf_counter()
        status: int | None = None
        trace_id = error = None
        try:
            response = await self._http.post("/v1/agent", json=body, headers=headers)
            status = response.status_code
            if status == 200:
                trace_id = response.json().get("trace_id")
            else:
                error = response.text[:200]
        except httpx.HTTPError as failure:
            error = repr(failure)
        latency_ms = (time.perf_counter() - started) * 1e3
        self._answered += 1
        self._errors += status != 200
        if settings.progress is not None:
            settings.progress(self._answered, self._errors, self._total)
        return RequestOutcome(prompt.row, prompt.intent, tenant.tenant_id, status, latency_ms, sent_ns, trace_id, error)


async def replay_open_loop(
    gateway_url: str,
    prompts: Sequence[UserPrompt],
    settings: UserSettings,
    *,
    rate_scale: float = 1.0,
    duration_s: float | None = None,
) -> list[RequestOutcome]:
    """Send each prompt at its row's arrival offset divided by ``rate_scale``; outcomes in prompt order.

    Offsets count from the first prompt's row. Prompts due after ``duration_s`` **seconds** are not sent.

    Raises:
        ValueError: ``rate_scale`` <= 0 or no tenants.
    """
    if rate_scale <= 0:
        raise ValueError(f"rate_scale must be > 0, got {rate_scale}")
    if not prompts:
        return []
    origin = prompts[0].row.arrival_offset_s
    due = [(p, (p.row.arrival_offset_s - origin) / rate_scale) for p in prompts]
    due = [(p, t) for p, t in due if duration_s is None or t <= duration_s]
    async with httpx.AsyncClient(base_url=gateway_url, timeout=settings.timeout_s) as http:
        sender = _Sender(http, settings, len(due))
        started = time.monotonic()

        async def at(position: int, prompt: UserPrompt, offset_s: float) -> RequestOutcome:
            await asyncio.sleep(max(0.0, started + offset_s - time.monotonic()))
            return await sender.send(position, prompt)

        return list(await asyncio.gather(*(at(i, p, t) for i, (p, t) in enumerate(due))))


async def replay_closed_loop(
    gateway_url: str,
    prompts: Sequence[UserPrompt],
    settings: UserSettings,
    *,
    users: int = 1,
    duration_s: float | None = None,
) -> list[RequestOutcome]:
    """``users`` users send the prompts in order, each waiting for its previous answer; outcomes in prompt
    order. No user starts a new request after ``duration_s`` **seconds**.

    Raises:
        ValueError: ``users`` < 1 or no tenants.
    """
    if users < 1:
        raise ValueError(f"users must be >= 1, got {users}")
    outcomes: list[RequestOutcome | None] = [None] * len(prompts)
    positions = iter(range(len(prompts)))
    async with httpx.AsyncClient(base_url=gateway_url, timeout=settings.timeout_s) as http:
        sender = _Sender(http, settings, len(prompts))
        started = time.monotonic()

        async def user() -> None:
            for position in positions:
                if duration_s is not None and time.monotonic() - started > duration_s:
                    return
                outcomes[position] = await sender.send(position, prompts[position])

        await asyncio.gather(*(user() for _ in range(min(users, len(prompts)))))
    return [outcome for outcome in outcomes if outcome is not None]
