"""Secrets are compared in constant time: the admin key through `hmac.compare_digest`, virtual keys
by looking up their SHA-256 (gateway/policy/keys.py says why that is enough), and no `==` on a
secret anywhere in the service's code."""

from __future__ import annotations

import ast
import hashlib
import hmac
import re
from pathlib import Path

import pytest

from gateway.policy.key_store import KeyStore
from gateway.policy.principal import ADMIN, AuthenticationError, authenticate

ROOT = Path(__file__).resolve().parents[2]
SECRET_NAME = re.compile(
    r"admin_key|api_key|presented|secret|key_hash|plaintext|credential|bearer|^token$|_token$"
)
# A SQL expression: the database finds the key's row by the SHA-256 of what was sent (keys.py says
# why comparing hashes of 256-bit random keys needs no constant-time compare).
ALLOWED = {"virtual_keys.c.key_hash == key_hash"}
ADMIN_KEY = "admin-key-for-timing-0123456789"


def _names(node: ast.AST) -> list[str]:
    return [
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    ]


def secret_equality_comparisons(path: Path) -> list[str]:
    """`a == b` / `a != b` where either side names something that holds a secret."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Compare) or not any(
            isinstance(op, ast.Eq | ast.NotEq) for op in node.ops
        ):
            continue
        operands = [node.left, *node.comparators]
        if any(isinstance(o, ast.Constant) and o.value is None for o in operands):
            continue
        names = [name.lower() for o in operands for name in _names(o)]
        if any(SECRET_NAME.search(name) for name in names) and ast.unparse(node) not in ALLOWED:
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_secret_is_compared_with_equals() -> None:
    files = [p for package in ("gateway", "providers") for p in (ROOT / package).rglob("*.py")]
    assert len(files) > 50
    assert [hit for path in files for hit in secret_equality_comparisons(path)] == []


def test_the_scan_does_find_an_equality_on_a_secret(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text("def check(presented: str, admin_key: str) -> bool:\n    return presented == admin_key\n")
    assert secret_equality_comparisons(bad) != []


class _NoKeys:
    async def any_exist(self) -> bool:
        return True

    async def find(self, presented: str) -> None:
        return None


async def test_the_admin_key_goes_through_compare_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    keys: KeyStore = _NoKeys()  # type: ignore[assignment]
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    assert await authenticate(headers, admin_key=ADMIN_KEY, keys=keys, open_mode=False) is ADMIN
    near_miss = {"authorization": f"Bearer {ADMIN_KEY[:-1]}X"}
    with pytest.raises(AuthenticationError):
        await authenticate(near_miss, admin_key=ADMIN_KEY, keys=keys, open_mode=False)
    # Digests, not the keys: equal lengths whatever was presented, so not even the length leaks.
    digest = hashlib.sha256(ADMIN_KEY.encode()).digest()
    assert calls == [(digest, digest), (hashlib.sha256((ADMIN_KEY[:-1] + "X").encode()).digest(), digest)]
