"""The real `tollgate` command, run as a user runs it: a fresh process in a directory of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Tollgate = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def tollgate(tmp_path: Path) -> Tollgate:
    """`tollgate ARGV…` in tmp_path, with none of the caller's TOLLGATE_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOLLGATE_")}

    def run(*argv: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gateway.cli.main", *argv],
            cwd=tmp_path,
            env={**env, **extra_env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


def one_line_error(result: subprocess.CompletedProcess[str], *, code: int = 1) -> str:
    """The single line on stderr of a command that failed as a user should see it fail."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]
