"""litellm is the `tollgate[litellm]` extra: without it the default gateway builds and prices, and a
config that asks for a `type: litellm` provider is refused up front, naming the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# `sys.modules[name] = None` is how Python spells "not installed" to `import` and to find_spec.
WITHOUT_LITELLM = "import sys\nsys.modules['litellm'] = None\n"
LONG_TAIL = """
providers:
  bedrock: {type: litellm, model_prefix: bedrock}
models:
  claude-haiku: {provider: bedrock, price: {input_per_mtok: "0.25", output_per_mtok: "1.25"}}
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_LITELLM + code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_check_config_and_serve_name_the_extra_a_litellm_provider_needs(tmp_path: Path) -> None:
    config = tmp_path / "tollgate.yaml"
    config.write_text(LONG_TAIL)
    code = (
        "from gateway.cli.main import main\n"
        f"print('check', main(['check-config', {str(config)!r}]))\n"
        f"print('serve', main(['serve', '--config', {str(config)!r}]))\n"
    )
    result = run(code)
    assert result.stdout.split() == ["check", "1", "serve", "1"], result.stderr
    expected = (
        f"{config}: providers.bedrock: type litellm needs the optional extra, which is not installed: "
        "pip install 'tollgate[litellm]'"
    )
    assert f"invalid config: {expected}\n" in result.stderr
    assert f"invalid config, not starting: {expected}\n" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_embedded_default_builds_its_app_and_prices_without_litellm() -> None:
    code = (
        "import asyncio\n"
        "from gateway.cli.main import _offline_config\n"
        "from gateway.app import create_app\n"
        "from gateway.models import price_book\n"
        "config = _offline_config(None)\n"
        "create_app(config)\n"
        "book = price_book(config)\n"
        "print(book.version.split('+')[0], book.lookup('gpt-4o').source)\n"
    )
    result = run(code)
    assert result.returncode == 0, result.stderr
    version, source = result.stdout.split()
    assert version.startswith("prices-") and source == "litellm:gpt-4o"
