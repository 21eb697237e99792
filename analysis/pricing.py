"""Token prices and the cost of model calls.

A price table (YAML; the packaged ``analysis/prices.yaml`` is the reference and the default)::

    version: 1
    currency: USD
    as_of: "2026-11-01"        # when the figures were read (free text)
    models:                     # ordered; the first entry whose glob matches the model wins (case ignored)
      - models: ["gpt-4o*"]     # globs over the model name (``*`` any run, ``?`` one character)
        input: 2.50             # price per 1,000,000 uncached input tokens
        cached_input: 1.25      # per 1,000,000 input tokens served from a prompt cache (default: ``input``)
        output: 10.00           # per 1,000,000 output tokens (reasoning tokens included)

Cost of a call, in the table's currency: ``((input - cached) * input_price + cached * cached_input_price +
output * output_price) / 1e6``, token semantics as :mod:`analysis.genai` states them (input counts the cached
prompt tokens too; reasoning tokens are part of output), which is how OpenAI, Anthropic (cache reads) and Google
bill them. A model no entry matches has no price: its cost is null, never 0.

Validation happens at load (pydantic); every problem is reported at once, each under its key path, in one
:class:`PriceTableError`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from analysis.rule_files import RuleFileError, read_packaged_rules, read_rule_file, validate_rules
from analysis.stage_rules import Globs, glob_regex

TOKENS_PER_PRICE_UNIT = 1_000_000
DEFAULT_PRICES_RESOURCE = "prices.yaml"


class ModelPrice(BaseModel):
    """Prices of the models one entry's globs match, per 1,000,000 tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: Globs
    input: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    output: float = Field(ge=0)


class PriceTable(BaseModel):
    """An ordered price table (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(default=1, ge=1, le=1)
    currency: str = "USD"
    as_of: str | None = None
    models: list[ModelPrice] = Field(default_factory=list)

    def prices(self, models: pl.Series) -> pl.DataFrame:
        """Per model name (String Series), its prices: input, cached_input, output (Float64 per 1,000,000
        tokens; null where no entry matches)."""
        frame = pl.DataFrame({"model": models.cast(pl.String)})
        price = (
            pl.coalesce(
                *(
                    pl.when(pl.col("model").str.contains(glob_regex(entry.models))).then(i)
                    for i, entry in enumerate(self.models)
                )
            )
            if self.models
            else pl.lit(None, dtype=pl.Int64)
        )
        matched = frame.select(price.cast(pl.Int64).alias("entry"))["entry"]
        table = pl.DataFrame(
            {
                "entry": list(range(len(self.models))),
                "input": [e.input for e in self.models],
                "cached_input": [e.input if e.cached_input is None else e.cached_input for e in self.models],
                "output": [e.output for e in self.models],
            },
            schema={"entry": pl.Int64, "input": pl.Float64, "cached_input": pl.Float64, "output": pl.Float64},
        )
        return pl.DataFrame({"entry": matched}).join(table, on="entry", how="left", maintain_order="left").drop("entry")

    def cost(self, usage: pl.DataFrame) -> pl.Series:
        """Cost of each row of ``usage`` (columns model, input_tokens, output_tokens, cached_input_tokens; nulls
        read as 0 tokens), in :attr:`currency`; null where the model has no price or no name."""
        prices = self.prices(usage["model"])
        tokens = usage.select(
            pl.col("input_tokens").fill_null(0).cast(pl.Float64),
            pl.col("cached_input_tokens").fill_null(0).cast(pl.Float64),
            pl.col("output_tokens").fill_null(0).cast(pl.Float64),
        )
        cached = pl.min_horizontal(pl.col("cached_input_tokens"), pl.col("input_tokens"))
        return (
            pl.concat([tokens, prices], how="horizontal")
            .select(
                (
                    (pl.col("input_tokens") - cached) * pl.col("input")
                    + cached * pl.col("cached_input")
                    + pl.col("output_tokens") * pl.col("output")
                )
                / TOKENS_PER_PRICE_UNIT
            )
            .to_series()
            .alias("cost")
        )


class PriceTableError(RuleFileError):
    """A price table is invalid. ``issues`` lists every problem as ``"<key path>: <message>"``."""

    table = "price table"


def parse_price_table(document: object, origin: str = "<document>") -> PriceTable:
    """Validate a parsed YAML/JSON document as a price table.

    Raises:
        PriceTableError: every problem, each under its key path.
    """
    return validate_rules(PriceTable, document, origin, PriceTableError)


def load_price_table(path: str | Path | None = None) -> PriceTable:
    """The price table at ``path`` (YAML), or the packaged default when ``path`` is None.

    Raises:
        PriceTableError: the file cannot be read, is not YAML, or breaks the schema (every problem listed).
    """
    if path is None:
        return parse_price_table(*read_packaged_rules("analysis", DEFAULT_PRICES_RESOURCE))
    return parse_price_table(read_rule_file(path, PriceTableError), str(path))
