"""The package boundaries DESIGN.md draws, checked on every run rather than remembered."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> top-level packages it must never import
FORBIDDEN = {
    "sandbox": {"gateway", "providers", "pricing", "local_backend", "migrations"},
    "providers": {"gateway", "sandbox", "migrations", "sqlalchemy"},
    "pricing": {"gateway", "providers", "sandbox", "httpx"},
    "gateway": {"sandbox"},
    # The vocabulary below providers/ and pricing/ (token usage): it leans on none of Tollgate's packages.
    "usage": {"gateway", "providers", "pricing", "sandbox", "local_backend", "migrations"},
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_what_it_must_not(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


# Inside gateway/, requests flow forward through the stages: a stage never reaches up into the
# ingress handlers, the command line or the dashboard that sit on top of it, nor into the `Runtime`
# that assembles them all (a stage says what it needs as a Protocol, e.g. `accounting.closing.Books`).
STAGES = (
    "accounting",
    "caching",
    "config",
    "context",
    "execution",
    "http",
    "observability",
    "policy",
    "routing",
    "state",
)
ABOVE_STAGES = ("gateway.routes", "gateway.cli", "gateway.dashboard", "gateway.runtime")


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


@pytest.mark.parametrize("stage", STAGES)
def test_stage_does_not_import_the_layers_above_it(stage: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.startswith(ABOVE_STAGES))
        for path in (ROOT / "gateway" / stage).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_gateway_top_level_stays_small() -> None:
    """The stages live in packages; only the app, runtime, errors, registry and workers stay loose."""
    loose = sorted(p.name for p in (ROOT / "gateway").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 10, loose
