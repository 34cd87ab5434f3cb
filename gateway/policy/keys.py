"""Virtual key format and hashing: pure functions, no I/O, clock or config.

A key looks like `tg-ab12cd34_<43 url-safe characters>`. The part before `_` (`tg-ab12cd34`) is the
visible prefix: stored in clear, shown in listings and logs, so people can tell their keys apart.
The rest is 32 random bytes from `secrets.token_urlsafe` (256 bits). Only a hash of the whole key
is stored; the plaintext is shown once, at creation.

Why SHA-256 and not bcrypt, scrypt or argon2: those are deliberately slow (tens of milliseconds) to
make guessing *low-entropy* passwords from a stolen hash expensive. A virtual key carries 256 random
bits, so guessing is hopeless however fast the hash is, and slowness would buy nothing while costing
tens of milliseconds of CPU on every request (each request verifies its key). SHA-256 costs about a
microsecond, and being unsalted and deterministic it lets the database find a key by its hash
through a unique index instead of scanning rows.

Constant-time comparison: the lookup by hash is a database index search, which is not constant-time,
but it compares *hashes* of what the caller sent; timing can at best reveal something about a
hash's leading bytes, which says nothing about any key (SHA-256 is preimage resistant). Secrets that
are compared directly, like the admin key, use `secrets_equal`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string

SCHEME = "tg-"
PREFIX_LENGTH = 8
SECRET_BYTES = 32
# Lower-case letters and digits only, so the visible prefix never contains the `_` separator and
# reads the same when someone dictates it.
_PREFIX_ALPHABET = string.ascii_lowercase + string.digits
# token_urlsafe(32) gives 43 characters; accept a little more for keys minted with more bytes later.
_FORMAT = re.compile(r"tg-[a-z0-9]{8}_[A-Za-z0-9_-]{32,128}")


def generate_key() -> tuple[str, str, str]:
    """A new key: (plaintext, visible prefix, hash). Only the prefix and the hash may be stored."""
    prefix = SCHEME + "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(PREFIX_LENGTH))
    plaintext = f"{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"
    return plaintext, prefix, hash_key(plaintext)


def hash_key(plaintext: str) -> str:
    """The stored form of a key: SHA-256 of its UTF-8 bytes, as 64 lower-case hex characters."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def is_well_formed(text: str) -> bool:
    """Whether `text` could be a Tollgate key; anything else is rejected without hashing or I/O."""
    return _FORMAT.fullmatch(text) is not None


def visible_prefix(text: str) -> str | None:
    """The shareable part of a well-formed key (`tg-ab12cd34`), else None."""
    return text[: len(SCHEME) + PREFIX_LENGTH] if is_well_formed(text) else None


def secrets_equal(presented: str, expected: str) -> bool:
    """Compare two secrets in time independent of where they first differ, and of their lengths:
    both sides are hashed first, so only equal-length digests are ever compared."""
    return hmac.compare_digest(
        hashlib.sha256(presented.encode()).digest(), hashlib.sha256(expected.encode()).digest()
    )
