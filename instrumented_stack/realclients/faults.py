"""Client-side fault switches: one per cause that diagnosis finds from client-side spans alone.

A fault is data (:data:`CLIENT_FAULTS`): what it changes, and the change itself, to the app the chat-loop
drivers run (:class:`~instrumented_stack.realclients.common.AppSettings`) and/or to the vLLM emulator the
harness serves (:class:`~instrumented_stack.engine.EngineConfig`). Neither the app nor the emulator names a
fault anywhere: spans carry only what the instrumentation libraries record. Run with the engine's own spans off
(``engine_spans=False``), a run leaves only the client's spans, which is what these causes are for.

App faults need a driver that runs the hand-written chat loop (``APP_SETTINGS``: ``openai_v2``,
``openinference_openai``, ``openllmetry_openai``, ``langfuse``); emulator faults work under every driver. The
table in ``instrumented_stack/README.md`` lists the same faults with what one run measured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from instrumented_stack.engine import EngineConfig
from instrumented_stack.engine.throttle import ThrottleConfig
from instrumented_stack.realclients.common import AppSettings

EnginePatch = Callable[[EngineConfig], EngineConfig]

SLOW_MODEL_SPEED = 0.05
"""The emulator's speed under ``llm_bound``: every step takes 20x as long, prefill and decode alike. At 6.7x (0.15)
the LLM share was 0.95 on a quiet host, and the client's own work, stretched by a loaded one (CI at load 11), took it
under the rule's 0.9 twice."""
SLOW_PREFILL_S_PER_TOKEN = 2.5e-3
"""Modeled seconds per computed prompt token under ``slow_first_token`` (the default is 6e-5): a 600-token
prompt waits about 1.5 s for its first token; decode steps keep their cost."""
THROTTLE = ThrottleConfig(fraction=0.4, status=429, retry_after_s=0.05, seed=3)
"""``provider_throttling``: 429 with ``Retry-After`` on a seeded 40 % of attempts. Seed 3 refuses the first 12
calls' attempts 1, 1, 0, 2, 2, 0, 0, 0, 0, 1, 0, 0 times: never three times in a row, which would exhaust the
OpenAI SDK's two retries and end the driver's run."""


def _engine(**updates: Any) -> EnginePatch:
    def patch(config: EngineConfig) -> EngineConfig:
        return config.model_copy(update=updates)

    return patch


def _slow_prefill(config: EngineConfig) -> EngineConfig:
    scheduler = config.scheduler.model_copy(update={"enable_prefix_caching": False})
    time_model = config.time_model.model_copy(update={"prefill_s_per_token": SLOW_PREFILL_S_PER_TOKEN})
    return config.model_copy(update={"scheduler": scheduler, "time_model": time_model})


def _slow_model(config: EngineConfig) -> EngineConfig:
    return config.model_copy(update={"time_model": config.time_model.model_copy(update={"speed": SLOW_MODEL_SPEED})})


@dataclass(frozen=True, slots=True)
class ClientFault:
    """One switch: ``name``, ``changes`` (what it does), ``app`` (AppSettings fields it sets) and ``engine``
    (the emulator change, or ``None``)."""

    name: str
    changes: str
    app: dict[str, Any] = field(default_factory=dict)
    engine: EnginePatch | None = None


CLIENT_FAULTS: dict[str, ClientFault] = {
    fault.name: fault
    for fault in (
        ClientFault(
            "llm_bound",
            f"the model is {1 / SLOW_MODEL_SPEED:.0f}x slower (emulator speed {SLOW_MODEL_SPEED}): model calls "
            "become nearly all of each request",
            engine=_slow_model,
        ),
        ClientFault(
            "sequential_llm_calls",
            "the app asks three independent side questions about the user's question one after another before "
            "its tool loop (the clean counterpart asks them at once)",
            app={"side_questions": 3, "side_questions_concurrent": False},
        ),
        ClientFault(
            "context_growth",
            "the app appends the whole conversation to the transcript it sends before every call, so each call "
            "re-sends every earlier message again",
            app={"resend_history": True},
        ),
        ClientFault(
            "prompt_cache_unused",
            "the system prompt (three times the instruction block, over 1,024 tokens) starts with the current "
            "time to the microsecond, so no call shares a prefix with another (the clean counterpart keeps the "
            "long prompt without the clock)",
            app={"system_prompt_repeats": 3, "clock_in_system_prompt": True},
        ),
        ClientFault(
            "repeated_tool_calls",
            "the app runs every tool call the model asks for twice with the same arguments",
            app={"repeat_tool_calls": True},
        ),
        ClientFault(
            "slow_first_token",
            f"the emulator's prefill costs {SLOW_PREFILL_S_PER_TOKEN * 1e3:g} ms per prompt token (default 0.06) "
            "and its prefix cache is off: every call waits over a second for its first token, streaming as fast "
            "as before",
            engine=_slow_prefill,
        ),
        ClientFault(
            "provider_throttling",
            f"the emulator refuses {THROTTLE.fraction:.0%} of attempts with {THROTTLE.status} and Retry-After "
            f"{THROTTLE.retry_after_s} s (seed {THROTTLE.seed}); the OpenAI SDK waits and retries",
            engine=_engine(throttle=THROTTLE),
        ),
    )
}


def apply_client_faults(
    app: AppSettings, engine: EngineConfig, faults: Iterable[str]
) -> tuple[AppSettings, EngineConfig]:
    """``app`` and ``engine`` with each named fault applied, in order. Raises ``KeyError`` for an unknown name."""
    for name in faults:
        fault = CLIENT_FAULTS[name]
        app = replace(app, **fault.app)
        if fault.engine is not None:
            engine = fault.engine(engine)
    return app, engine
