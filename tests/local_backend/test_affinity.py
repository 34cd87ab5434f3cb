"""Prefix affinity: stable keys, rendezvous placement, minimal remapping and bounded load."""

from __future__ import annotations

from collections import Counter

import pytest

from local_backend.affinity import AffinityPolicy, bounded, preference, prefix_key, route

REPLICAS = ("gpu-a", "gpu-b", "gpu-c")
SYSTEM = "You are the support assistant of Example Corp. " * 40  # ~1,900 characters


def idle(names: tuple[str, ...] = REPLICAS) -> dict[str, float]:
    return dict.fromkeys(names, 0.0)


def test_requests_sharing_the_first_kilobyte_share_a_key() -> None:
    first = prefix_key(SYSTEM + "How do I reset my password?")
    second = prefix_key(SYSTEM + "Where is my invoice for March?")
    assert first is not None
    assert first == second
    assert prefix_key("Another tenant's prompt. " * 80) != first


def test_a_prompt_shorter_than_the_hashed_span_has_no_key() -> None:
    assert prefix_key("x" * 1023) is None
    assert prefix_key("x" * 1024) is not None
    assert prefix_key("x" * 100, block_chars=10, blocks=10) is not None


def test_only_the_hashed_span_counts() -> None:
    # 16 blocks of 64 characters: what follows the first 1,024 characters never moves a request.
    assert prefix_key("a" * 1024 + "tail one") == prefix_key("a" * 1024 + "another tail")
    assert prefix_key("b" + "a" * 1023) != prefix_key("a" * 1024)


def test_same_prefix_same_replica() -> None:
    key = prefix_key(SYSTEM)
    assert key is not None
    chosen = {route(key, idle())[0] for _ in range(20)}
    assert len(chosen) == 1
    # The order does not depend on how the replicas are listed.
    assert preference(key, reversed(REPLICAS)) == preference(key, REPLICAS)


def test_keys_spread_over_the_replicas() -> None:
    homes = Counter(preference(key, REPLICAS)[0] for key in range(3000))
    assert set(homes) == set(REPLICAS)
    assert all(800 < count < 1200 for count in homes.values()), homes


def test_a_removed_replica_only_remaps_its_own_keys() -> None:
    four = (*REPLICAS, "gpu-d")
    before = {key: preference(key, four)[0] for key in range(4000)}
    after = {key: preference(key, REPLICAS)[0] for key in range(4000)}
    moved = {key for key in before if before[key] != after[key]}
    assert moved == {key for key, home in before.items() if home == "gpu-d"}
    # ...and each of them goes to its second choice, not anywhere.
    assert all(after[key] == preference(key, four)[1] for key in moved)


def test_an_added_replica_takes_about_a_quarter_of_the_keys() -> None:
    before = {key: preference(key, REPLICAS)[0] for key in range(4000)}
    after = {key: preference(key, (*REPLICAS, "gpu-d"))[0] for key in range(4000)}
    moved = [key for key in before if before[key] != after[key]]
    assert all(after[key] == "gpu-d" for key in moved)
    assert 800 < len(moved) < 1200


def test_bounded_load_moves_the_overflow_to_the_next_preference() -> None:
    key = prefix_key(SYSTEM)
    assert key is not None
    home, second, third = preference(key, REPLICAS)
    # mean 0.8, bound 1.0: the home at 1.8 is over it.
    loads = {home: 1.8, second: 0.5, third: 0.1}
    assert route(key, loads) == [second, third, home]
    # Within the bound the home keeps the request even though another replica is idler.
    loads = {home: 0.9, second: 0.8, third: 0.7}
    assert route(key, loads)[0] == home


def test_a_light_fleet_keeps_affinity_below_the_floor() -> None:
    # One request on an otherwise idle fleet is far above (1 + epsilon) x mean, but under the floor.
    order = ["a", "b", "c"]
    loads = {"a": 0.01, "b": 0.0, "c": 0.0}
    assert bounded(order, loads, epsilon=0.25, floor=0.1) == order
    assert bounded(order, loads, epsilon=0.25, floor=0.0) == ["b", "c", "a"]


def test_overloaded_replicas_go_last_least_loaded_first() -> None:
    order = ["a", "b", "c", "d"]
    loads = {"a": 3.0, "b": 2.0, "c": 0.0, "d": 0.0}
    assert bounded(order, loads, epsilon=0.0, floor=0.0) == ["c", "d", "b", "a"]
    assert bounded([], {}, epsilon=0.25, floor=0.1) == []


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        AffinityPolicy(blocks=0)
    with pytest.raises(ValueError):
        AffinityPolicy(epsilon=-1)
