"""The agent's brain, as pure functions: intent routing and the next action of the planning loop.

Routing reads the *last line* of the user's prompt (the latest turn; earlier lines are conversation
history) and applies :data:`ROUTES` in order; the first matching rule names the intent, else ``chat``.

The planning loop asks :func:`next_action` for one action at a time, given what was observed so far:

========= =====================================================================
intent    actions
========= =====================================================================
chat      answer
policy    retrieve -> answer
catalogue retrieve -> catalogue_lookup(sku from the question, else the best hit) -> answer
calculate calculator(expression from the question) -> answer
========= =====================================================================

A failed tool or a missing argument skips to ``answer``; the loop's step limit forces ``answer`` on the
last step, so a plan always ends with exactly one answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from instrumented_stack.tools import CALCULATOR, CATALOGUE_LOOKUP

Intent = Literal["chat", "policy", "catalogue", "calculate"]

SKU = re.compile(r"\bSKU-[0-9]{4}\b")
EXPRESSION = re.compile(r"[0-9(][0-9.\s+\-*/()]*[0-9)]")

ROUTES: tuple[tuple[Intent, re.Pattern[str]], ...] = (
    ("catalogue", re.compile(r"\bSKU-[0-9]{4}\b|\b(price|stock|in stock|cost of)\b", re.IGNORECASE)),
    ("calculate", re.compile(r"\b(calculate|compute)\b", re.IGNORECASE)),
    (
        "policy",
        re.compile(
            r"\b(return|refund|ship|shipping|deliver|delivery|warranty|cancel|payment|invoice|discount|gift|"
            r"account|password|support)\w*\b",
            re.IGNORECASE,
        ),
    ),
)
"""Ordered routing rules: ``(intent, pattern searched in the last line)``."""


def last_line(prompt: str) -> str:
    """The prompt's last non-blank line (the whole prompt when it has one line)."""
    lines = [line for line in prompt.splitlines() if line.strip()]
    return lines[-1] if lines else prompt


def route(prompt: str) -> Intent:
    """The intent of ``prompt`` by :data:`ROUTES` over its last line."""
    question = last_line(prompt)
    for intent, pattern in ROUTES:
        if pattern.search(question):
            return intent
    return "chat"


@dataclass(frozen=True, slots=True)
class Action:
    """One step: ``retrieve`` (``query``), ``tool`` (``tool``, ``arguments``) or ``answer``."""

    kind: Literal["retrieve", "tool", "answer"]
    query: str = ""
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PlanState:
    """What the loop has seen: ``documents`` from retrieval (dicts with ``sku``), ``tool_results``
    (tool name -> result, or ``None`` when the call failed)."""

    intent: Intent
    question: str
    documents: list[dict[str, Any]] | None = None
    tool_results: dict[str, Any] = field(default_factory=dict)


def next_action(state: PlanState, steps_left: int) -> Action:
    """The next action for ``state`` with ``steps_left`` steps (including this one) left."""
    if steps_left <= 1:
        return Action("answer")
    if state.intent in ("policy", "catalogue") and state.documents is None:
        return Action("retrieve", query=state.question)
    if state.intent == "catalogue" and CATALOGUE_LOOKUP not in state.tool_results:
        sku = _sku(state)
        return Action("tool", tool=CATALOGUE_LOOKUP, arguments={"sku": sku}) if sku else Action("answer")
    if state.intent == "calculate" and CALCULATOR not in state.tool_results:
        found = EXPRESSION.search(state.question)
        expression = found.group(0).strip() if found else ""
        return Action("tool", tool=CALCULATOR, arguments={"expression": expression}) if expression else Action("answer")
    return Action("answer")


def _sku(state: PlanState) -> str | None:
    found = SKU.search(state.question)
    if found:
        return found.group(0)
    return next((doc["sku"] for doc in state.documents or [] if doc.get("sku")), None)
