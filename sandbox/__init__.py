"""Upstream LLM API emulators (OpenAI, vLLM, Anthropic and Gemini) for tests, benchmarks and the demo.

Independent of every other Tollgate package on purpose: it implements the wire
formats itself, so it catches the gateway adapters' mistakes instead of sharing them.
"""

from sandbox.app import SandboxApp, create_app
from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer

__all__ = ["SandboxApp", "SandboxConfig", "SandboxServer", "create_app"]
