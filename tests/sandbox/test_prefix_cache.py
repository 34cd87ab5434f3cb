"""Prefix cache: chained 16-token blocks, LRU eviction, and each dialect's reporting."""

from __future__ import annotations

from sandbox.prefix_cache import CachePolicy, PrefixCache


def tokens(n: int, *, start: int = 0) -> list[str]:
    return [f"t{i}" for i in range(start, start + n)]


def test_leading_full_blocks_hit() -> None:
    cache = PrefixCache()
    assert cache.match(tokens(100)) == 0
    assert cache.match(tokens(100)) == 96  # 6 full blocks
    assert cache.match(tokens(40)) == 32  # a shorter prompt sharing the prefix


def test_last_token_is_always_computed() -> None:
    cache = PrefixCache()
    cache.match(tokens(32))
    assert cache.match(tokens(32)) == 16


def test_hashes_are_chained() -> None:
    cache = PrefixCache()
    cache.match(tokens(64))
    changed = ["other", *tokens(63, start=1)]  # first block differs, the rest equal
    assert cache.match(changed) == 0


def test_lru_evicts_oldest_blocks() -> None:
    cache = PrefixCache(capacity_blocks=4)
    cache.match(tokens(64))
    cache.match(tokens(64, start=1000))
    assert len(cache) == 4
    assert cache.usage == 1.0
    assert cache.match(tokens(64)) == 0
    cache.clear()
    assert cache.usage == 0.0


def test_openai_policy_reports_128_token_steps_from_1024() -> None:
    policy = CachePolicy(min_prompt_tokens=1024, step_tokens=128)
    assert not policy.cacheable(1000)
    assert policy.cacheable(1024)
    assert policy.reported(1184) == 1152
    assert policy.reported(1008) == 0
    assert CachePolicy().reported(1184) == 1184
