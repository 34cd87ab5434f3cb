"""The install is pinned and lean: constraints.txt pins every requirement `make test` installs, and
litellm is an extra, not a runtime requirement."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pinned() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
            assert match, f"constraints.txt: not a name==version pin: {line!r}"
            name = canonicalize_name(match[1])
            assert name not in pins, f"constraints.txt pins {name} twice"
            pins[name] = match[2]
    return pins


def requirements(*extras: str) -> list[Requirement]:
    found = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in extras:
        found += [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    return [r for r in found if canonicalize_name(r.name) != "tollgate"]


def test_every_requirement_of_the_dev_install_is_pinned_within_its_range() -> None:
    pins = pinned()
    for requirement in requirements("dev", "litellm"):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is required but not in constraints.txt: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject's {requirement.specifier}"
        )


def test_litellm_is_an_extra_that_dev_brings_and_the_runtime_does_not() -> None:
    runtime = {canonicalize_name(r.name) for r in requirements()}
    assert "litellm" not in runtime
    assert [r.name for r in requirements("litellm")][-1] == "litellm"
    assert "tollgate[litellm]" in PROJECT["optional-dependencies"]["dev"]
