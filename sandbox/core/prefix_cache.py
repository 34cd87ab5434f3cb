"""A vLLM-style prefix cache: chained hashes of 16-token blocks in an LRU of fixed capacity."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CachePolicy", "PrefixCache"]


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """How a dialect reports hits: the smallest cacheable prompt and the reporting step.

    vLLM reports every hit block (step 16, no minimum); OpenAI caches only prompts
    of at least 1,024 tokens and reports hits in 128-token steps (1024, 1152, ...).
    """

    min_prompt_tokens: int = 0
    step_tokens: int = 16

    def cacheable(self, prompt_tokens: int) -> bool:
        """True when a prompt of this length is stored in (and looked up from) the cache."""
        return prompt_tokens >= max(self.min_prompt_tokens, 1)

    def reported(self, hit_tokens: int) -> int:
        """The cached-token count the dialect reports for a raw block hit."""
        reported = hit_tokens - hit_tokens % self.step_tokens
        return reported if reported >= self.min_prompt_tokens else 0


class PrefixCache:
    """Block-granular prefix cache; a block's hash includes the hash of the block before it."""

    def __init__(self, *, block_size: int = 16, capacity_blocks: int = 16384) -> None:
        if block_size < 1 or capacity_blocks < 1:
            raise ValueError("block_size and capacity_blocks must be positive")
        self.block_size = block_size
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self._held = 0

    def __len__(self) -> int:
        return len(self._blocks)

    @property
    def usage(self) -> float:
        """vLLM's kv_cache_usage_perc (0-1): the share of blocks that running requests hold.

        Blocks kept only for the prefix cache do not count: vLLM returns a finished request's
        blocks to its free queue with their hashes (evictable, still hittable) and reports
        1 - free / total, so an idle replica reads ~0 however warm its cache is.
        """
        return min(self._held / self.capacity_blocks, 1.0)

    def hold(self, tokens: int) -> int:
        """A running request takes the blocks for `tokens`; returns how many, for `release`."""
        blocks = -(-tokens // self.block_size)
        self._held += blocks
        return blocks

    def release(self, blocks: int) -> None:
        self._held = max(self._held - blocks, 0)

    def match(self, tokens: Sequence[str], *, insert: bool = True) -> int:
        """Return how many leading tokens are cached, then store the prompt's full blocks.

        Like vLLM, the last prompt token is always computed, so a fully cached
        prompt of 32 tokens reports 16 cached tokens, not 32.
        """
        size = self.block_size
        full = len(tokens) // size
        hashes: list[int] = []
        previous = 0
        for start in range(0, full * size, size):
            previous = hash((previous, tuple(tokens[start : start + size])))
            hashes.append(previous)
        blocks = self._blocks
        hit = 0
        for block_hash in hashes[: (len(tokens) - 1) // size]:
            if block_hash not in blocks:
                break
            hit += 1
        if insert:
            for block_hash in hashes:
                blocks[block_hash] = None
                blocks.move_to_end(block_hash)
            while len(blocks) > self.capacity_blocks:
                blocks.popitem(last=False)
        return hit * size

    def clear(self) -> None:
        """Forget every block."""
        self._blocks.clear()
