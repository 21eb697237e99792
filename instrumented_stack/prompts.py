"""User prompts for workload rows: exact token counts, a question that sets the intent, shared prefixes.

A row becomes ``<history>\\n<question>``: the question (last line) is drawn from :data:`QUESTIONS` for an
intent picked by ``intent_mix``, and the history is filler text of exactly the remaining tokens, so the whole
prompt has the row's ``prompt_tokens`` tokens under the stack's tokenizer (counts add up across
whitespace; ``tokenizer``). For a ``chat`` row the agent sends exactly this prompt to the LLM, so the engine
sees the row's token count.

The history of a Mooncake row is built block by block: block *j* (512 tokens) is the synthesized text for
seed ``hash_ids[j]``, so rows sharing leading ``hash_ids`` share a token prefix and the engine's prefix cache
can reuse it, as the trace intends. Other rows get history seeded by the run seed and the user session they are a
turn of (:meth:`instrumented_stack.loadgen.UserSettings.session`), so a conversation's turns resend one history
(the shorter turn's history is the start of the longer's) as a chat client resends its conversation, and the
engine's prefix cache can serve it; a row of no session gets history of its own, seeded by its index.

Everything depends only on ``(seed, row)``: the same seed replays the same prompts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from instrumented_stack.corpus import load_catalogue
from instrumented_stack.planning import Intent
from instrumented_stack.tokenizer import Tokenizer
from instrumented_stack.workload import MOONCAKE_BLOCK_TOKENS, WorkloadRequest

DEFAULT_INTENT_MIX: Mapping[Intent, float] = {"chat": 0.4, "policy": 0.25, "catalogue": 0.25, "calculate": 0.1}
"""Share of each intent among replayed rows."""

POLICY_QUESTIONS: tuple[str, ...] = (
    "How long does a refund take to arrive ?",
    "Can I return opened electronics ?",
    "What does express shipping cost ?",
    "How do I make a warranty claim ?",
    "Can I cancel my order after it is packed ?",
    "Which payment methods do you accept ?",
    "How do I reset my account password ?",
    "When is support open on Saturday ?",
)
CHAT_QUESTIONS: tuple[str, ...] = (
    "Please continue the conversation above .",
    "Can you summarise what we said so far ?",
    "Tell me more about that .",
)


def catalogue_question(rng: np.random.Generator) -> str:
    """A price or stock question naming a product by SKU or by name."""
    product = load_catalogue()[int(rng.integers(len(load_catalogue())))]
    if rng.random() < 0.5:
        return f"What is the price of {product.sku} ?"
    return f"Is the {product.name} in stock ?"


def calculate_question(rng: np.random.Generator) -> str:
    """An arithmetic question the calculator tool answers."""
    a, b, c = (int(v) for v in rng.integers(2, 99, 3))
    return f"Please calculate ( {a} + {b} ) * {c}"


def question(intent: Intent, rng: np.random.Generator) -> str:
    """A last-line question that routes to ``intent`` (``planning.route``)."""
    if intent == "catalogue":
        return catalogue_question(rng)
    if intent == "calculate":
        return calculate_question(rng)
    pool = POLICY_QUESTIONS if intent == "policy" else CHAT_QUESTIONS
    return pool[int(rng.integers(len(pool)))]


@dataclass(frozen=True, slots=True)
class UserPrompt:
    """A workload row made into a request: ``prompt`` has ``row.prompt_tokens`` tokens when the row is
    longer than its question (otherwise the question alone)."""

    row: WorkloadRequest
    intent: Intent
    prompt: str


class PromptBuilder:
    """Builds :class:`UserPrompt` s; thread-safe.

    Args:
        tokenizer: the stack's tokenizer (the engine's).
        seed: the run seed.
        intent_mix: weights per intent (need not sum to 1; all >= 0, some > 0).

    Raises:
        ValueError: bad weights.
    """

    def __init__(self, tokenizer: Tokenizer, seed: int = 0, intent_mix: Mapping[Intent, float] = DEFAULT_INTENT_MIX):
        weights = np.array(list(intent_mix.values()), dtype=float)
        if weights.size == 0 or (weights < 0).any() or weights.sum() <= 0:
            raise ValueError(f"intent_mix needs non-negative weights with a positive sum, got {dict(intent_mix)}")
        self._tokenizer = tokenizer
        self._seed = seed
        self._intents: list[Intent] = list(intent_mix)
        self._weights = weights / weights.sum()

    def build(self, row: WorkloadRequest, session: tuple[int, int] | None = None) -> UserPrompt:
        """The prompt of ``row``, a turn of user ``session`` (``UserSettings.session``; None: a row of its own);
        see the module docstring."""
        rng = np.random.default_rng([self._seed, row.index])
        intent = self._intents[int(rng.choice(len(self._intents), p=self._weights))]
        last = question(intent, rng)
        history_tokens = row.prompt_tokens - self._tokenizer.count(last)
        if history_tokens < 1:
            return UserPrompt(row, intent, last)
        return UserPrompt(row, intent, f"{self._history(row, history_tokens, session)}\n{last}")

    def _history(self, row: WorkloadRequest, num_tokens: int, session: tuple[int, int] | None) -> str:
        if not row.hash_ids:
            if session is None:
                return self._tokenizer.synthesize(num_tokens, seed=self._seed * 1_000_003 + row.index)
            # One generator per session: equal seeds draw equal leading words, whatever the length.
            seed = int(np.random.SeedSequence([self._seed, *session]).generate_state(1)[0])
            return self._tokenizer.synthesize(num_tokens, seed=seed)
        blocks = []
        for position, block_hash in enumerate(row.hash_ids):
            size = min(MOONCAKE_BLOCK_TOKENS, num_tokens - position * MOONCAKE_BLOCK_TOKENS)
            if size <= 0:
                break
            # Seeded by the block hash only, so equal hash_ids give equal text across rows and runs.
            blocks.append(self._tokenizer.synthesize(size, seed=block_hash))
        return " ".join(blocks)
