"""PagedAttention KV blocks with prefix caching by block hash, the way vLLM v1's KV cache manager keeps them.

Sources (vllm-project/vllm, read for behaviour, not copied): ``vllm/v1/core/block_pool.py`` (free block
queue in eviction order, hash -> block map, ``ref_cnt``), ``vllm/v1/core/kv_cache_manager.py``
(``get_computed_blocks``, ``allocate_slots``, ``free``) and ``vllm/v1/core/kv_cache_utils.py`` (chained
block hashes over full blocks).

Model:

- The cache has ``num_blocks`` blocks of ``block_size`` token slots (vLLM's default block size is 16).
- A request's prompt is cut into full blocks; block *i*'s hash chains the hash of block *i-1* with the token
  ids of block *i* (:func:`block_hashes`), so two prompts share cached blocks exactly as far as their token
  prefixes agree.
- A block is *free* when no running request holds it (``ref_cnt == 0``). Free blocks keep their hash, and so
  stay reusable by a later prompt, until they are handed out again: the free queue is in eviction order
  (least recently freed first), and a request's blocks are freed tail first so a prompt's last blocks are
  evicted before its first ones.
- KV usage (``vllm:kv_cache_usage_perc``) is the fraction of blocks held by requests; cached free blocks
  count as free, as in vLLM.

Generated tokens are not hashed (the emulator has no output token ids), so only prompt blocks are ever
cached. Not thread-safe: the scheduler owns it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

BlockHash = int
"""A chained block hash (Python's ``hash`` of ``(parent hash, token ids)``; stable for ints and tuples)."""

_ROOT_HASH: BlockHash = 0


def block_hashes(token_ids: Sequence[int], block_size: int) -> list[BlockHash]:
    """Chained hashes of every *full* ``block_size``-token block of ``token_ids``, in order.

    A trailing partial block has no hash (it cannot be shared). Raises ``ValueError`` for ``block_size < 1``.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    hashes: list[BlockHash] = []
    parent = _ROOT_HASH
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        hashes.append(parent)
    return hashes


class KvBlockPool:
    """``num_blocks`` KV blocks, their reference counts and the prefix cache.

    Args:
        num_blocks: KV capacity in blocks (>= 1).
        block_size: tokens per block (>= 1).
        enable_prefix_caching: when false, no hash is ever registered and lookups find nothing.

    Raises:
        ValueError: a size below 1.
    """

    def __init__(self, num_blocks: int, block_size: int, *, enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"num_blocks and block_size must be >= 1, got {num_blocks} and {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._ref_cnt = [0] * num_blocks
        self._hash_of: list[BlockHash | None] = [None] * num_blocks
        self._cached: dict[BlockHash, int] = {}
        # Insertion order is eviction order; values unused (an ordered set with O(1) removal).
        self._free: OrderedDict[int, None] = OrderedDict((block, None) for block in range(num_blocks))

    @property
    def num_free_blocks(self) -> int:
        """Blocks no request holds (cached or not)."""
        return len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of blocks held by requests, 0.0 to 1.0."""
        return 1.0 - len(self._free) / self.num_blocks

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to hold ``num_tokens`` tokens."""
        return -(-num_tokens // self.block_size)

    def lookup_prefix(self, hashes: Sequence[BlockHash]) -> list[int]:
        """Cached blocks matching the longest prefix of ``hashes`` (block ids, in order; may be empty)."""
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        for block_hash in hashes:
            block = self._cached.get(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits

    def can_allocate(self, cached_blocks: Sequence[int], num_new_blocks: int) -> bool:
        """Whether ``num_new_blocks`` fresh blocks fit once ``cached_blocks`` are taken out of the free queue."""
        reclaimed = sum(1 for block in cached_blocks if self._ref_cnt[block] == 0)
        return len(self._free) - reclaimed >= num_new_blocks

    def take(self, cached_blocks: Sequence[int], num_new_blocks: int) -> list[int]:
        """Hold ``cached_blocks`` and ``num_new_blocks`` fresh ones; return them in that order.

        Fresh blocks come from the head of the free queue; a fresh block that was cached loses its hash
        (evicted). Raises ``RuntimeError`` when they do not fit (check :meth:`can_allocate` first).
        """
        if not self.can_allocate(cached_blocks, num_new_blocks):
            raise RuntimeError(f"{num_new_blocks} blocks do not fit in {len(self._free)} free blocks")
        for block in cached_blocks:
            if self._ref_cnt[block] == 0:
                del self._free[block]
            self._ref_cnt[block] += 1
        fresh: list[int] = []
        for _ in range(num_new_blocks):
            block, _ = self._free.popitem(last=False)
            evicted = self._hash_of[block]
            if evicted is not None:
                del self._cached[evicted]
                self._hash_of[block] = None
            self._ref_cnt[block] = 1
            fresh.append(block)
        return [*cached_blocks, *fresh]

    def cache(self, block: int, block_hash: BlockHash) -> None:
        """Register a held, full ``block`` under ``block_hash`` (no-op without prefix caching or if known)."""
        if not self.enable_prefix_caching or block_hash in self._cached or self._hash_of[block] is not None:
            return
        self._cached[block_hash] = block
        self._hash_of[block] = block_hash

    def release(self, blocks: Sequence[int]) -> None:
        """Drop one reference to each of ``blocks``; blocks reaching zero join the free queue tail first."""
        for block in reversed(blocks):
            self._ref_cnt[block] -= 1
            if self._ref_cnt[block] == 0:
                self._free[block] = None
