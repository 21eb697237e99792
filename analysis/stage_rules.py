"""The stage rule table: its schema, the packaged default, and loading a user's table.

A table maps a span to one stage of :data:`STAGES` (README.md, "Analysis", says what each means). Document shape
(YAML; the packaged ``stage_rules.yaml`` is the reference)::

    version: 1
    include_defaults: false   # true: the packaged rules follow this file's rules
    llm_caller_stage: agent   # a span no rule matches, with an LLM call of its own service below it (null: off)
    step_stages: [tool, retrieval]  # a span no rule matches below a span of these stages is part of that step
    same_service_stages: [agent]    # else, when the nearest matched span above it is of these stages and of
                                    # its own service, part of that span (default [agent]; [] turns it off)
    rules:                    # ordered; the first rule whose every condition holds wins, declared rules first
      - stage: retrieval      # one of STAGES
        declared: true        # optional: the rule reads the kind a span's instrumentation declares in an
                              # attribute (openinference.span.kind: RETRIEVER): tried before every rule that
                              # is not declared, so a declared kind beats a name glob (see below)
        why: vector stores serve retrieval    # free text, for the reader
        source: OpenInference span kinds  # where the convention the rule reads is defined (spec, project)
        split: vllm           # optional: tile the span into phases, ``stage`` being what it gets when the
                              # phases are unknown: ``vllm`` by vLLM's latency attributes (analysis.vllm);
                              # ``first_token`` at its first token (analysis.genai): an LLM call whose
                              # inside is not traced, llm.first_token then llm.stream
        traced_stage: llm.call # optional, with ``split: first_token``: the span's stage when a SERVER span
                              # lies below it, i.e. the model server is traced and its spans break the
                              # inference down (the call's own time is what they leave unexplained)
        transport: true       # optional: a span of this rule below an LLM call is the request carrying
                              # that call: its own time takes the call's stage (pieces)
        prepare_stage: agent  # optional, with ``split: first_token``: the stage of the call's time before
                              # the first request carrying it starts (building the request, SDK start-up)
        match:                # at least one condition; all must hold
          name: ["*search*"]            # globs over the span name
          name_regex: "^GET /v[0-9]+/"  # a regular expression searched in the span name (Rust syntax)
          service: ["*gateway*"]        # globs over service_name
          kind: [Client, Producer]      # span kinds, in the Server/Client/... spelling
          attributes:                   # attribute key -> globs over its value; "*" = present
            db.system: [qdrant, milvus]
          has_children: false           # whether the span has children in its trace

Globs know ``*`` (any run of characters) and ``?`` (one character) and ignore case; a string stands for a
list of one. A span no rule matches is ``other``.

Precedence: the ``declared`` rules are tried first, in table order, then the others, in table order. A span's
kind as its instrumentation declares it (``gen_ai.operation.name``, ``openinference.span.kind`` ...) is the best
evidence of what it is; a name or service glob is a guess, so a user's function that happens to be named
``call_llm`` or ``parse_output`` takes the kind its attributes declare. Generic declarations (a chain, a
workflow, a plain function) say too little to overrule a name and stay undeclared rules. An LLM call that only an
undeclared rule makes (a name glob) yields to a declared LLM call of its own service below it
(:func:`analysis.stages.match_rules`): the real call is the one below, the span around it its caller
(``llm_caller_stage``). Inside a declared call it does not yield: there it is part of that call's work.

Validation happens at load (pydantic), and every problem is reported at once, each under its key path
(``rules[3].match.kind[0]: ...``), in one :class:`StageRulesError`.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Annotated, Literal, get_args

import numpy.typing as npt
import polars as pl
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from analysis.rule_files import RuleFileError, read_packaged_rules, read_rule_file, validate_rules
from analysis.spans import SpanKind

Stage = Literal[
    "network",
    "gateway",
    "agent",
    "retrieval",
    "tool",
    "llm.tokenize",
    "llm.queue",
    "llm.prefill",
    "llm.decode",
    "llm.detokenize",
    "llm.call",
    "llm.first_token",
    "llm.stream",
    "output_parsing",
    "other",
]
STAGES: tuple[Stage, ...] = get_args(Stage)
"""The stage taxonomy, in pipeline order (README.md, "Analysis"). ``llm.tokenize`` .. ``llm.detokenize`` are an engine's
phases where its spans show them (vLLM's ``llm_request``); ``llm.call``, ``llm.first_token`` and
``llm.stream`` are LLM calls whose inside is not traced (a hosted API, or an engine without tracing): the whole
call, or its wait up to the first token and the streaming after it where the span tells the first token."""
LLM_STAGES: tuple[Stage, ...] = tuple(stage for stage in STAGES if stage.startswith("llm."))
"""Every stage that is time spent on a model call."""
STAGE_DTYPE = pl.Enum(STAGES)
"""Polars dtype of every ``stage`` column the analysis returns (sorts in taxonomy order)."""
DEFAULT_STAGE: Stage = "other"
"""The stage of a span that no rule matches."""
SplitMode = Literal["vllm", "first_token"]

DEFAULT_RULES_RESOURCE = "stage_rules.yaml"


def stage_series(codes: npt.ArrayLike, name: str = "stage") -> pl.Series:
    """Stage indices (into :data:`STAGES`) as a :data:`STAGE_DTYPE` Series."""
    return pl.Series(name, STAGES, dtype=STAGE_DTYPE).gather(codes)


def _listed(value: object) -> object:
    return [value] if isinstance(value, str) else value


Globs = Annotated[list[str], BeforeValidator(_listed), Field(min_length=1)]


def glob_regex(globs: list[str]) -> str:
    """A case-insensitive, anchored regular expression (Rust and Python syntax) matching any of ``globs``."""
    alternatives = (
        "".join(".*" if char == "*" else "." if char == "?" else re.escape(char) for char in glob) for glob in globs
    )
    return "(?is)^(?:" + "|".join(alternatives) + ")$"


class SpanMatch(BaseModel):
    """The conditions of one rule; all given conditions must hold (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Globs | None = None
    name_regex: str | None = None
    service: Globs | None = None
    kind: Annotated[list[SpanKind], BeforeValidator(_listed), Field(min_length=1)] | None = None
    attributes: dict[str, Globs] | None = Field(default=None, min_length=1)
    has_children: bool | None = None

    @field_validator("name_regex")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        # Polars evaluates the pattern, so its (Rust) regex engine is the judge.
        try:
            pl.Series([""]).str.contains(pattern)
        except pl.exceptions.ComputeError as error:
            reason = " ".join(str(error).split("This error occurred")[0].split())
            raise ValueError(f"not a valid regular expression: {reason}") from None
        return pattern

    @model_validator(mode="after")
    def _not_empty(self) -> SpanMatch:
        if all(getattr(self, field) is None for field in type(self).model_fields):
            raise ValueError("a match needs at least one condition")
        return self


class StageRule(BaseModel):
    """One row of the table: spans matching ``match`` get ``stage`` (or are split, see ``split``); ``declared``
    rules are tried before the others (module docstring, "Precedence")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: Stage
    match: SpanMatch
    split: SplitMode | None = None
    traced_stage: Stage | None = None
    transport: bool = False
    prepare_stage: Stage | None = None
    declared: bool = False
    why: str | None = None
    source: str | None = None

    @model_validator(mode="after")
    def _traced_stage_needs_a_call(self) -> StageRule:
        for name in ("traced_stage", "prepare_stage"):
            if getattr(self, name) is not None and self.split != "first_token":
                raise ValueError(f"{name} applies to LLM calls only (split: first_token)")
        return self


class StageRules(BaseModel):
    """An ordered rule table; the first matching rule, declared rules first, decides a span's stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    include_defaults: bool = False
    llm_caller_stage: Stage | None = "agent"
    step_stages: list[Stage] = Field(default_factory=lambda: ["tool", "retrieval"])
    same_service_stages: list[Stage] = Field(default_factory=lambda: ["agent"])
    rules: list[StageRule] = Field(min_length=1)

    @property
    def precedence(self) -> list[int]:
        """Indices into ``rules`` in the order they are tried: the declared rules, then the others, each in table
        order."""
        return sorted(range(len(self.rules)), key=lambda index: not self.rules[index].declared)

    @property
    def attribute_keys(self) -> list[str]:
        """Every attribute key some rule reads, in first-use order."""
        keys: dict[str, None] = {}
        for rule in self.rules:
            keys.update(dict.fromkeys(rule.match.attributes or {}))
        return list(keys)


class StageRulesError(RuleFileError):
    """A rule table is invalid. ``issues`` lists every problem as ``"<key path>: <message>"``."""

    table = "stage rules"


def parse_stage_rules(document: object, origin: str = "<document>") -> StageRules:
    """Validate a parsed YAML/JSON document as a rule table (``include_defaults`` is *not* applied here).

    Raises:
        StageRulesError: every problem, each under its key path.
    """
    return validate_rules(StageRules, document, origin, StageRulesError)


@cache
def default_stage_rules() -> StageRules:
    """The packaged table (``analysis/stage_rules.yaml``), read and validated once per process (it is frozen)."""
    return parse_stage_rules(*read_packaged_rules("analysis", DEFAULT_RULES_RESOURCE))


def load_stage_rules(path: str | Path | None = None) -> StageRules:
    """The rule table at ``path`` (YAML), or the packaged default when ``path`` is None.

    A user table with ``include_defaults: true`` gets the packaged rules appended after its own, so it
    only needs the rules it adds or overrides.

    Raises:
        StageRulesError: the file cannot be read, is not YAML, or breaks the schema (every problem listed).
    """
    if path is None:
        return default_stage_rules()
    rules = parse_stage_rules(read_rule_file(path, StageRulesError), str(path))
    if not rules.include_defaults:
        return rules
    return rules.model_copy(update={"rules": [*rules.rules, *default_stage_rules().rules]})
