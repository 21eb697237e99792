"""Token counting for the stack until issue 4 brings a real tokenizer.

The workloads give only token *counts* (Azure: ``ContextTokens``, ``GeneratedTokens``); like the
Splitwise methodology that produced that trace, the stack sends a prompt with the required number of
tokens and forces the engine to generate the required number. With a whitespace tokenizer one word is
one token, so a synthetic prompt of N words is exactly N prompt tokens on the emulator.
"""

from __future__ import annotations

from typing import Protocol


class Tokenizer(Protocol):
    """What the stack needs from a tokenizer. Implementations are pure and thread-safe."""

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (0 for empty or blank text)."""
        ...

    def synthesize(self, num_tokens: int, *, seed: int = 0) -> str:
        """A text of exactly ``num_tokens`` tokens; ``seed`` varies the words, not the count.

        Raises:
            ValueError: ``num_tokens`` is negative.
        """
        ...


class WhitespaceTokenizer:
    """One token per whitespace-separated word; synthesizes words ``w<k>`` from a small vocabulary."""

    def __init__(self, vocabulary_size: int = 512) -> None:
        if vocabulary_size < 1:
            raise ValueError(f"vocabulary_size must be >= 1, got {vocabulary_size}")
        self._vocabulary_size = vocabulary_size

    def count(self, text: str) -> int:
        """Number of whitespace-separated words in ``text``."""
        return len(text.split())

    def synthesize(self, num_tokens: int, *, seed: int = 0) -> str:
        """``num_tokens`` words joined by single spaces, cycling through the vocabulary from ``seed``."""
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be >= 0, got {num_tokens}")
        size = self._vocabulary_size
        return " ".join(f"w{(seed + i) % size}" for i in range(num_tokens))
