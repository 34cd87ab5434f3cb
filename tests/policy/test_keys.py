"""Key format, entropy and hashing."""

from __future__ import annotations

import hashlib
import re

from gateway.policy.keys import generate_key, hash_key, is_well_formed, secrets_equal, visible_prefix

FORMAT = re.compile(r"tg-([a-z0-9]{8})_([A-Za-z0-9_-]{43})")


def test_a_key_has_the_documented_shape() -> None:
    plaintext, prefix, key_hash = generate_key()
    match = FORMAT.fullmatch(plaintext)
    assert match, plaintext
    assert prefix == f"tg-{match.group(1)}" and plaintext.startswith(prefix + "_")
    assert key_hash == hashlib.sha256(plaintext.encode()).hexdigest() == hash_key(plaintext)
    assert re.fullmatch(r"[0-9a-f]{64}", key_hash)
    assert plaintext not in key_hash and match.group(2) not in key_hash


def test_keys_do_not_repeat_and_their_secret_part_is_random() -> None:
    keys = [generate_key()[0] for _ in range(2_000)]
    assert len(set(keys)) == len(keys)
    secrets = [k.split("_", 1)[1] for k in keys]
    assert len({s[:8] for s in secrets}) == len(secrets)  # even 48 bits never collide here
    # 64 url-safe symbols should all turn up across ~86k random characters.
    assert len(set("".join(secrets))) == 64
    assert len({k[3:11] for k in keys}) > 1_990  # the visible prefixes tell keys apart


def test_hashing_is_deterministic_and_distinguishes_keys() -> None:
    plaintext, _, key_hash = generate_key()
    assert hash_key(plaintext) == key_hash
    assert hash_key(plaintext + "x") != key_hash
    assert hash_key(plaintext.upper()) != key_hash


def test_only_well_formed_keys_are_worth_a_lookup() -> None:
    plaintext, prefix, _ = generate_key()
    assert is_well_formed(plaintext) and visible_prefix(plaintext) == prefix
    for junk in (
        "",
        "tg-",
        "sk-" + plaintext[3:],
        plaintext[:20],
        plaintext + " ",
        "tg-ABCDEFGH_" + "a" * 43,
    ):
        assert not is_well_formed(junk), junk
        assert visible_prefix(junk) is None


def test_secrets_compare_by_value() -> None:
    assert secrets_equal("admin-secret", "admin-secret")
    assert not secrets_equal("admin-secret", "admin-secreT")
    assert not secrets_equal("admin", "admin-secret")
    assert secrets_equal("ünïcode", "ünïcode")
