"""Prefix cache: chained 16-token blocks, LRU eviction, and each dialect's reporting."""

from __future__ import annotations

from sandbox.core.prefix_cache import CachePolicy, PrefixCache


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
    assert cache.match(tokens(64)) == 0
    cache.clear()
    assert len(cache) == 0


def test_openai_policy_reports_128_token_steps_from_1024() -> None:
    policy = CachePolicy(min_prompt_tokens=1024, step_tokens=128)
    assert not policy.cacheable(1000)
    assert policy.cacheable(1024)
    assert policy.reported(1184) == 1152
    assert policy.reported(1008) == 0
    assert CachePolicy().reported(1184) == 1184


def test_usage_counts_what_running_requests_hold_not_the_warm_cache() -> None:
    cache = PrefixCache(capacity_blocks=10)
    cache.match(tokens(160))  # ten blocks cached by a finished request
    assert cache.usage == 0.0  # as vLLM: cached blocks sit in the free queue, evictable
    held = cache.hold(33)  # a running request: 33 tokens -> 3 blocks
    assert held == 3 and cache.usage == 0.3
    cache.release(held)
    assert cache.usage == 0.0
