"""The stack's real tokenizer: a byte-pair-encoding model trained locally with Hugging Face ``tokenizers``.

Nothing is downloaded. On first use the BPE model is trained on the shipped corpus (``corpus.py``, about a
thousand distinct words; training takes a few tens of milliseconds) and written to
``<cache dir>/tokenizer-<digest>.json`` (``env.stack_cache_dir``), where ``<digest>`` covers the training
texts and settings, so a changed corpus trains a new file. Every service then loads that file, exactly as a
vLLM server or client loads a model's ``tokenizer.json``.

Replaying workloads needs prompts of an exact token count (the traces give only counts: Azure
``ContextTokens``, Mooncake ``input_length``). The pre-tokenizer splits on whitespace and punctuation, so
the token count of texts joined by whitespace is the sum of their counts; :meth:`BpeTokenizer.synthesize`
joins words that each encode to exactly one token, so ``n`` words are ``n`` tokens. The choice of words
depends only on the seed and is prefix-stable: the first ``k`` words of ``synthesize(n, seed=s)`` are
``synthesize(k, seed=s)``, which lets equal Mooncake block hashes become equal token prefixes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import models, pre_tokenizers, trainers

from instrumented_stack.corpus import corpus_texts
from instrumented_stack.env import stack_cache_dir

VOCAB_SIZE = 4000
"""Upper bound of the trained vocabulary (the shipped corpus yields about 1,600 entries)."""

UNK_TOKEN = "[UNK]"


class Tokenizer(Protocol):
    """What the stack needs from a tokenizer. Implementations are pure and thread-safe."""

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (empty for blank text)."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (0 for empty or blank text)."""
        ...

    def synthesize(self, num_tokens: int, *, seed: int = 0) -> str:
        """A text of exactly ``num_tokens`` tokens; ``seed`` varies the words, not the count.

        Raises:
            ValueError: ``num_tokens`` is negative.
        """
        ...


class BpeTokenizer:
    """A :class:`Tokenizer` over a ``tokenizers`` model read from a ``tokenizer.json`` file.

    Raises:
        ValueError: from the constructor, when the model has no word that encodes to a single token.
    """

    def __init__(self, model: HfTokenizer) -> None:
        self._model = model
        vocabulary = sorted(model.get_vocab().items(), key=lambda item: item[1])
        self._words = [word for word, _ in vocabulary if word.isalpha() and len(model.encode(word).ids) == 1]
        if not self._words:
            raise ValueError("the tokenizer has no single-token word to synthesize text from")

    @classmethod
    def from_file(cls, path: Path) -> BpeTokenizer:
        """Load ``tokenizer.json``. Raises ``OSError`` or ``Exception`` from ``tokenizers`` on a bad file."""
        return cls(HfTokenizer.from_file(str(path)))

    @property
    def vocab_size(self) -> int:
        """Entries in the vocabulary."""
        return self._model.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        # encode_batch releases the GIL while it encodes (encode holds it), so other threads run meanwhile.
        return self._model.encode_batch([text], add_special_tokens=False)[0].ids

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        return len(self.encode(text))

    def synthesize(self, num_tokens: int, *, seed: int = 0) -> str:
        """``num_tokens`` single-token words joined by spaces, drawn by a generator seeded with ``seed``."""
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be >= 0, got {num_tokens}")
        picks = np.random.default_rng(seed).integers(0, len(self._words), num_tokens)
        words = self._words
        return " ".join(words[i] for i in picks)


def train_tokenizer(texts: list[str], vocab_size: int = VOCAB_SIZE) -> HfTokenizer:
    """A BPE model with a whitespace/punctuation pre-tokenizer trained on ``texts``."""
    model = HfTokenizer(models.BPE(unk_token=UNK_TOKEN))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[UNK_TOKEN], show_progress=False)
    model.train_from_iterator(texts, trainer)
    return model


def tokenizer_file(cache_dir: Path | None = None) -> Path:
    """Path of the trained ``tokenizer.json``, training and caching it first if needed.

    Safe when several processes race: each writes a temporary file and renames it into place.
    """
    texts = corpus_texts()
    digest = hashlib.sha256(json.dumps([VOCAB_SIZE, texts]).encode()).hexdigest()[:12]
    path = stack_cache_dir(cache_dir) / f"tokenizer-{digest}.json"
    if not path.is_file():
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(handle)
        train_tokenizer(texts).save(temporary)
        os.replace(temporary, path)
    return path


@cache
def default_tokenizer() -> BpeTokenizer:
    """The process's shared tokenizer, from :func:`tokenizer_file` in the default cache directory."""
    return BpeTokenizer.from_file(tokenizer_file())
