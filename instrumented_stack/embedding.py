"""A deterministic hashing embedder and an exact top-K vector index, both in numpy.

The embedder is the feature-hashing trick: each lower-cased, crudely stemmed word that is not a stop word,
and each bigram of those, is hashed (BLAKE2b, stable across processes, unlike ``hash``) to one of
``dimension`` buckets with a sign, the counts are summed and the vector is L2-normalised. Texts sharing
words get a high cosine similarity, which is all a demo retriever needs, and nothing is downloaded.

The index keeps an ``(n, dimension)`` float32 matrix of unit vectors; a query is scored against all rows
(cosine = dot product) and the best ``k`` are returned, highest first.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

EMBEDDING_DIMENSION = 512
EMBEDDER_NAME = f"hashing-embedder-{EMBEDDING_DIMENSION}"
"""Reported as ``gen_ai.request.model`` on embeddings spans."""

_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS_TEXT = (
    "a an and are at be by can do does for from how i in is it long me my of on or so the this to what when "
    "which with you your"
)
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
"""Words too common to tell documents apart; left out so they do not dominate short queries."""

Vector = npt.NDArray[np.float32]


def _stem(word: str) -> str:
    """A crude plural/tense folding (``refunds`` -> ``refund``, ``shipped`` -> ``shipp``): enough for a demo."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def words(text: str) -> list[str]:
    """Lower-cased, crudely stemmed alphanumeric words of ``text`` without :data:`STOP_WORDS`."""
    return [_stem(word) for word in _WORD.findall(text.lower()) if word not in STOP_WORDS]


class HashingEmbedder:
    """Texts to unit vectors of ``dimension`` float32 values (shape ``(dimension,)``). Thread-safe."""

    def __init__(self, dimension: int = EMBEDDING_DIMENSION) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be >= 1, got {dimension}")
        self.dimension = dimension

    def embed(self, text: str) -> Vector:
        """The unit vector of ``text``; all zeros for a text without words."""
        vector = np.zeros(self.dimension, dtype=np.float32)
        tokens = words(text)
        features = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            vector[value % self.dimension] += 1.0 if value >> 63 else -1.0
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def embed_many(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of ``texts``, shape ``(len(texts), dimension)``."""
        return np.stack([self.embed(text) for text in texts]) if texts else np.zeros((0, self.dimension), np.float32)


class VectorIndex:
    """Exact cosine top-K over fixed unit vectors (shape ``(n, dimension)``). Read-only after construction."""

    def __init__(self, vectors: npt.NDArray[np.float32]) -> None:
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be 2-D (n, dimension), got shape {vectors.shape}")
        self._vectors = vectors

    def __len__(self) -> int:
        return int(self._vectors.shape[0])

    def search(self, query: Vector, k: int) -> list[tuple[int, float]]:
        """The ``min(k, n)`` best rows as ``(row, cosine score)``, best first. Raises ``ValueError`` for k < 1."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        scores = self._vectors @ query
        k = min(k, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        ordered = best[np.argsort(-scores[best], kind="stable")]
        return [(int(row), float(scores[row])) for row in ordered]
