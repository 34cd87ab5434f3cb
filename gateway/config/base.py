"""The base of every config model: unknown fields rejected (a typo fails at load, not silently),
frozen (config is read, never changed)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
