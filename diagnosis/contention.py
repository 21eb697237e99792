"""Host CPU contention as the rules see it: how strongly the window's timings are inflated by waiting for a CPU.

On a busy host every stage slows together, so a rule reading durations can see its pattern where there is
none (decode "growing" with the batch, a tool call that "froze" the loop, a prefill as slow as an uncached
one). The ``cpu_contention`` rule (:mod:`diagnosis.rules.cpu_contention`) judges the window once;
:class:`diagnosis.Diagnoser` puts its judgement on the context (``DiagnosisContext.contention``) before the
other rules run, and rules whose evidence is timing read it to lower their confidence, or to keep a finding at
``info`` when only timing supports it. Project rule (issue 18: diagnosis that stays right on a busy host).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ContentionSource = Literal["cpu_pressure", "cpu_utilization", "span_delays", "none"]
"""What the judgement rests on: the hosts' CPU pressure (Linux PSI, from metrics), a CPU utilization attribute
on the spans, the spans' own delays against their operation's baseline, or nothing that showed contention."""

TIMING_DISCOUNT = 0.5
"""At full contention (``level`` 1) timing evidence keeps half its confidence; at the threshold (``level`` 0.5)
three quarters. Contention makes timing ambiguous, it does not disprove it."""


@dataclass(frozen=True, slots=True)
class Contention:
    """The judgement of one window.

    Attributes:
        level: 0 when the host showed no contention; else 0.5 at the rule's threshold rising to 1 at its
            "full" value (dimensionless).
        source: the signal the judgement rests on.
    """

    level: float = 0.0
    source: ContentionSource = "none"

    @property
    def detected(self) -> bool:
        """True when the window's timings are inflated by waiting for a CPU."""
        return self.level > 0

    def discount(self, confidence: float) -> float:
        """``confidence`` (0..1) of timing evidence, lowered by :data:`TIMING_DISCOUNT` times ``level``,
        rounded to two decimals as :func:`diagnosis.findings.confidence` rounds."""
        return round(confidence * (1.0 - TIMING_DISCOUNT * self.level), 2)


NO_CONTENTION = Contention()
"""The judgement when none was made (the ``cpu_contention`` rule disabled) or nothing showed contention."""
