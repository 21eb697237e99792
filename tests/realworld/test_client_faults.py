"""The client-side fault switches and the app settings they set: what each changes, how the settings travel to
the driver process, and that the default app is the one the captures record."""

from __future__ import annotations

import pytest

from instrumented_stack.realclients.__main__ import main, parse_options
from instrumented_stack.realclients.common import SYSTEM_PROMPT, AppSettings
from instrumented_stack.realclients.emulator import emulator_config
from instrumented_stack.realclients.faults import CLIENT_FAULTS, apply_client_faults

BASE = ["openinference_openai", "--llm-url", "http://127.0.0.1:9", "--otlp-endpoint", "http://127.0.0.1:9"]


def test_the_default_app_is_the_captured_one() -> None:
    app = AppSettings()
    assert app.command_line() == [] and app.system_prompt() == SYSTEM_PROMPT
    assert parse_options(BASE).app == app


@pytest.mark.parametrize("fault", list(CLIENT_FAULTS))
def test_each_fault_changes_the_app_or_the_emulator_and_reaches_the_driver(fault: str) -> None:
    clean_engine = emulator_config(engine_spans=False)
    app, engine = apply_client_faults(AppSettings(), clean_engine, [fault])
    assert app != AppSettings() or engine != clean_engine
    assert parse_options(BASE + app.command_line()).app == app


def test_app_faults_set_what_the_table_says() -> None:
    app, engine = apply_client_faults(AppSettings(), emulator_config(engine_spans=False), ["sequential_llm_calls"])
    assert (app.side_questions, app.side_questions_concurrent) == (3, False)
    assert engine == emulator_config(engine_spans=False)
    throttled = apply_client_faults(AppSettings(), emulator_config(engine_spans=False), ["provider_throttling"])[1]
    assert throttled.throttle.fraction == 0.4 and throttled.throttle.status == 429
    slow = apply_client_faults(AppSettings(), emulator_config(engine_spans=False), ["slow_first_token"])[1]
    assert not slow.scheduler.enable_prefix_caching and slow.time_model.prefill_s_per_token == 2.5e-3


def test_the_clock_makes_every_system_prompt_different() -> None:
    app = AppSettings(clock_in_system_prompt=True, system_prompt_repeats=3)
    first, second = app.system_prompt(), app.system_prompt()
    assert first != second and first.startswith("Current time: ") and first.endswith(SYSTEM_PROMPT)
    assert first.count(SYSTEM_PROMPT) == 3


def test_unknown_names_and_settings_are_refused() -> None:
    with pytest.raises(KeyError, match="cold_cache"):
        apply_client_faults(AppSettings(), emulator_config(engine_spans=False), ["llm_bound", "cold_cache"])
    with pytest.raises(ValueError, match="side_questions"):
        AppSettings(side_questions=4)


def test_a_driver_without_the_chat_loop_refuses_app_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pydantic_ai", *BASE[1:], "--resend-history"]) == 2
    assert "does not run the chat loop" in capsys.readouterr().err
