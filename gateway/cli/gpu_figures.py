"""Where `tollgate local cost` gets a GPU deployment's figures: the flags, over the `gpu:` block of a
self-hosted model in the config, so only what neither gives is asked for, by name."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gateway.config.schema import Config
from gateway.config.self_hosted import GpuConfig

# flag, argparse attribute, GpuConfig field
FIGURES = (
    ("--gpu-hour", "gpu_hour", "gpu_hour_usd"),
    ("--gpus", "gpus", "gpus"),
    ("--input-tps", "input_tps", "input_tokens_per_second"),
    ("--output-tps", "output_tps", "output_tokens_per_second"),
    ("--utilisation", "utilisation", "utilisation"),
)
DEFAULT_UTILISATION = Decimal("0.6")


class MissingFigures(ValueError):
    """The flags and the config together do not describe a deployment; the message says what to add."""


@dataclass(frozen=True)
class GpuBlock:
    model: str
    provider: str
    gpu: GpuConfig


def gpu_blocks(config: Config) -> list[GpuBlock]:
    """Every deployment the config prices by its GPUs, in the file's order."""
    return [
        GpuBlock(name, deployment.provider, deployment.gpu)
        for name, model in config.models.items()
        for deployment in model.deployments
        if deployment.gpu is not None
    ]


def chosen_block(config: Config | None, model: str | None) -> GpuBlock | None:
    """The `gpu:` block to start from: MODEL's (its first GPU deployment), or the config's only one."""
    blocks = gpu_blocks(config) if config is not None else []
    named = ", ".join(dict.fromkeys(b.model for b in blocks)) or "none"
    if model is None:
        if len({b.model for b in blocks}) > 1:
            raise MissingFigures(
                f"the config prices several models by GPU ({named}): name one, e.g. "
                f"`tollgate local cost {blocks[0].model}`"
            )
        return blocks[0] if blocks else None
    if config is None:
        raise MissingFigures(f"'{model}' is looked up in a config: give --config FILE or set TOLLGATE_CONFIG")
    if model not in config.models:
        raise MissingFigures(f"no model '{model}' in the config (models with a gpu: block: {named})")
    mine = [b for b in blocks if b.model == model]
    if not mine:
        raise MissingFigures(f"model '{model}' has no gpu: block (models with one: {named})")
    return mine[0]


def gpu_figures(args: argparse.Namespace, config: Config | None) -> tuple[dict[str, Any], GpuBlock | None]:
    """`GpuDeployment.of` keyword arguments: each flag given, else the chosen block's value; and the
    block. MissingFigures names the flags that neither supplied."""
    block = chosen_block(config, args.model)
    configured = block.gpu.model_dump() if block is not None else {}
    figures = {field: _given(args, attr, configured.get(field)) for _, attr, field in FIGURES}
    if figures["utilisation"] is None:
        figures["utilisation"] = DEFAULT_UTILISATION
    missing = [flag for flag, _, field in FIGURES if figures[field] is None]
    if missing:  # only without a block: a gpu: block has every figure
        where = "the config has no gpu: block" if config is not None else "no config was given"
        raise MissingFigures(
            f"local cost needs {', '.join(missing)} ({where}): give them, or name a model whose "
            "gpu: block has them: `tollgate local cost MODEL --config FILE`"
        )
    return figures, block


def _given(args: argparse.Namespace, attr: str, fallback: Any) -> Any:
    value = getattr(args, attr)
    return fallback if value is None else value
