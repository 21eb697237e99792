"""The one interface every diagnosis rule shares, and the base of their configuration models."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from diagnosis.context import DiagnosisContext
from diagnosis.findings import Finding


class RuleConfig(BaseModel):
    """Thresholds of one rule. Every field is required (the packaged ``rules.yaml`` holds the defaults) and
    documented with its unit and the reasoning behind its default. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


ConfigT = TypeVar("ConfigT", bound=RuleConfig)


class Rule(ABC, Generic[ConfigT]):
    """Turns one pattern in a window of traces (and engine metrics) into a named cause.

    Subclasses set :attr:`cause` and :attr:`config_model` and implement :meth:`evaluate`. Rules hold no
    state between calls, so one instance may serve concurrent diagnoses.
    """

    cause: ClassVar[str]
    """The finding's cause name, and the rule's key in the rule table."""
    config_model: ClassVar[type[RuleConfig]]
    """The pydantic model of the rule's ``config`` in the table."""
    latency_share: ClassVar[str | None] = None
    """The finding's evidence key holding the share (0..1) of end-to-end latency on the critical path that the
    cause accounts for, where the rule measures one: comparing two windows' findings of the same cause and
    severity, a rise in it says the cause costs more than it did (``query.anomaly.compare_findings``)."""
    locates_only: ClassVar[bool] = False
    """True for a rule that says where latency goes rather than why (``llm_bound``): its finding ranks after the
    causes of the same severity, which say what to change."""
    tests_corroborate: ClassVar[bool] = False
    """True for a rule whose finding rests on a share of latency it measures, its tests only raising the severity
    (``decode_bound``: decode leading is measured; TPOT growing with the batch makes it a warning): a test of it that
    failed does not rank it after the findings of its severity whose tests passed."""
    stage: ClassVar[str | None] = None
    """The stage (``analysis.STAGES``) whose time :attr:`latency_share` is the share of, where it is one stage's:
    an incident on that stage's latency takes any rise of the share as the cause's doing."""

    def __init__(self, config: ConfigT) -> None:
        self.config = config

    @abstractmethod
    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        """The finding for ``ctx``'s window, or ``None`` when the pattern is absent or the window holds too
        little to judge."""
