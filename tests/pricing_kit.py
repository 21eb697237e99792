"""A price table of the tests' own, so a served Hotspan's costs can be checked against the tokens a driver's model
server answered: the emulator's model at round prices, in a currency no default uses."""

from __future__ import annotations

from pathlib import Path

EURO_PRICES = """
version: 1
currency: EUR
models:
  - models: ["meta-llama/*"]
    input: 1.0
    cached_input: 0.5
    output: 4.0
"""
"""1 EUR per 1M uncached input tokens of the emulator's model, 0.5 per 1M cached, 4 per 1M output."""


def euro_prices(directory: Path) -> Path:
    """:data:`EURO_PRICES` written to ``directory/prices.yaml`` (for ``HOTSPAN_PRICES``); its path."""
    path = directory / "prices.yaml"
    path.write_text(EURO_PRICES, encoding="utf-8")
    return path


def euros(input_tokens: int, cached: int, output: int) -> float:
    """The cost of tokens at :data:`EURO_PRICES`, EUR."""
    return ((input_tokens - cached) * 1.0 + cached * 0.5 + output * 4.0) / 1e6
