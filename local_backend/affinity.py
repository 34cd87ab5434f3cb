"""Prefix affinity: pure functions that send requests sharing a long prompt prefix to one replica, so
vLLM's automatic prefix cache hits, without letting a popular prefix overload that replica.

Key. The first `blocks` blocks of `block_chars` characters of the prompt text are hashed (blake2b,
64 bits). Characters stand in for vLLM's 16-token blocks: the gateway has no tokenizer for the
served model (and tokenizing would cost more than the routing it serves), and text that is equal
character for character tokenizes equally, so requests that share the hashed characters share
vLLM's cached blocks over them. The defaults, 16 blocks of 64 characters (about 256 tokens at ~4
characters a token), group requests by the first kilobyte: a shared system prompt or document.
A prompt shorter than that gets no key (there is little to cache; least loaded is the better
choice), and every key covers exactly the same span, so a conversation keeps its key as it grows.

Placement. Rendezvous (highest-random-weight) hashing: each replica's weight for a key is a hash
of (key, replica name) and the key's preference order is by weight. Removing a replica moves only
the keys it was first for; adding one takes about 1/n of the keys, each from one replica.

Bounded load (after Mirrokni, Thorup and Zadimoghaddam, "Consistent hashing with bounded loads",
2016): walking the preference order, a replica whose load exceeds

    bound = max((1 + epsilon) * mean load of the candidates, floor)

is skipped for the next one, so the overflow of a hot prefix lands on one consistent second
replica (which then caches that prefix too) rather than anywhere. The paper rounds each server's
capacity up to a whole request so that a single request never counts as overload; `floor` does the
same for the fractional load score (`fleet.load`: 0.1 is a tenth of the batch slots busy, nothing
queued).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from hashlib import blake2b


@dataclass(frozen=True, slots=True)
class AffinityPolicy:
    block_chars: int = 64
    blocks: int = 16
    epsilon: float = 0.25
    floor: float = 0.1

    def __post_init__(self) -> None:
        if self.block_chars < 1 or self.blocks < 1:
            raise ValueError("block_chars and blocks must be positive")
        if self.epsilon < 0 or self.floor < 0:
            raise ValueError("epsilon and floor must not be negative")


DEFAULT_POLICY = AffinityPolicy()


def prefix_key(text: str, *, block_chars: int = 64, blocks: int = 16) -> int | None:
    """A 64-bit key of the first `blocks` x `block_chars` characters; None for a shorter text."""
    span = block_chars * blocks
    if len(text) < span:
        return None
    return int.from_bytes(blake2b(text[:span].encode(), digest_size=8).digest(), "big")


def preference(key: int, names: Iterable[str]) -> list[str]:
    """Replica names in the key's rendezvous order, most preferred first."""
    salt = key.to_bytes(8, "big")
    return sorted(names, key=lambda name: (_weight(salt, name), name), reverse=True)


def bounded(order: Sequence[str], loads: Mapping[str, float], *, epsilon: float, floor: float) -> list[str]:
    """`order` with replicas over the load bound moved behind the rest (least loaded first)."""
    if not order:
        return []
    mean = sum(loads[name] for name in order) / len(order)
    bound = max((1.0 + epsilon) * mean, floor)
    within = [name for name in order if loads[name] <= bound]
    over = sorted((name for name in order if loads[name] > bound), key=lambda name: loads[name])
    return within + over


def route(key: int, loads: Mapping[str, float], *, policy: AffinityPolicy = DEFAULT_POLICY) -> list[str]:
    """Every replica in `loads`, best first: the key's preference order, with bounded load."""
    return bounded(preference(key, loads), loads, epsilon=policy.epsilon, floor=policy.floor)


def _weight(salt: bytes, name: str) -> int:
    return int.from_bytes(blake2b(name.encode(), digest_size=8, key=salt).digest(), "big")


__all__ = ["DEFAULT_POLICY", "AffinityPolicy", "bounded", "preference", "prefix_key", "route"]
