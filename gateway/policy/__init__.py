"""Who may call what: virtual keys, the key store and the caller's identity (`Principal`)."""

from gateway.policy.key_store import KeyRecord, KeyStore, KeyStoreUnavailable
from gateway.policy.keys import generate_key, hash_key
from gateway.policy.principal import (
    AuthenticationError,
    PermissionDenied,
    Principal,
    authenticate,
    require_admin,
    require_team,
)

__all__ = [
    "AuthenticationError",
    "KeyRecord",
    "KeyStore",
    "KeyStoreUnavailable",
    "PermissionDenied",
    "Principal",
    "authenticate",
    "generate_key",
    "hash_key",
    "require_admin",
    "require_team",
]
