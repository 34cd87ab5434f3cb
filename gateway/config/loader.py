"""YAML → `Config`: `${NAME}` secrets from the environment, cross-references checked, and every
problem reported with the YAML path of the field at fault."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gateway.config.schema import Config

PROVIDER_TYPES = ("openai", "vllm", "openai_compatible", "anthropic", "gemini", "litellm")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(ValueError):
    """A config that cannot be served; the message names the file, the field and the reason."""


def load_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> Config:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from exc
    return parse_config(text, source=str(path), environ=environ)


def parse_config(text: str, *, source: str = "<config>", environ: Mapping[str, str] | None = None) -> Config:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections")
    return build_config(raw, source=source, environ=environ)


def build_config(
    raw: dict[str, Any], *, source: str = "<config>", environ: Mapping[str, str] | None = None
) -> Config:
    env = os.environ if environ is None else environ
    expanded = _expand_env(raw, env, path=(), source=source)
    try:
        config = Config.model_validate(expanded)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = format_path(first["loc"])
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{source}: {where}: {first['msg']}{more}") from exc
    _check_references(config, source)
    return config


def format_path(loc: tuple[int | str, ...]) -> str:
    """('models', 'gpt-4o', 'deployments', 0, 'provider') -> 'models.gpt-4o.deployments[0].provider'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith("function-after["):
            continue
        elif part in PROVIDER_TYPES and out.startswith("providers.") and out.count(".") == 1:
            continue  # pydantic's discriminator tag, not a YAML key
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _expand_env(value: Any, env: Mapping[str, str], *, path: tuple[Any, ...], source: str) -> Any:
    if isinstance(value, dict):
        return {k: _expand_env(v, env, path=(*path, k), source=source) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, env, path=(*path, i), source=source) for i, v in enumerate(value)]
    if isinstance(value, str) and "${" in value:

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise ConfigError(f"{source}: {format_path(path)}: environment variable {name} is not set")

        return _ENV_REF.sub(substitute, value)
    return value


def _check_references(config: Config, source: str) -> None:
    for name, model in config.models.items():
        providers = [model.provider] if model.provider else [d.provider for d in model.deployments]
        for i, provider in enumerate(providers):
            if provider not in config.providers:
                where = f"models.{name}." + ("provider" if model.provider else f"deployments[{i}].provider")
                known = ", ".join(sorted(config.providers)) or "none"
                raise ConfigError(f"{source}: {where}: unknown provider '{provider}' (known: {known})")
        for i, fallback in enumerate(model.fallbacks):
            if fallback not in config.models:
                raise ConfigError(f"{source}: models.{name}.fallbacks[{i}]: unknown model '{fallback}'")
            if fallback == name:
                raise ConfigError(
                    f"{source}: models.{name}.fallbacks[{i}]: a model cannot fall back to itself"
                )
    for team, spec in config.teams.items():
        for i, allowed in enumerate(spec.allowed_models or ()):
            if allowed not in config.models and allowed not in config.aliases:
                raise ConfigError(f"{source}: teams.{team}.allowed_models[{i}]: unknown model '{allowed}'")
    for i, tier in enumerate(config.routing.tiers):
        for j, name in enumerate(tier.models):
            if name not in config.models:
                raise ConfigError(f"{source}: routing.tiers[{i}].models[{j}]: unknown model '{name}'")
    _check_routes(config, source)
    if config.routing.tiers and config.routing.auto_model in config.models:
        raise ConfigError(
            f"{source}: routing.auto_model: '{config.routing.auto_model}' is also a model's name"
        )
    for team, spec in config.teams.items():
        if spec.routing_thresholds is not None and len(spec.routing_thresholds) != max(
            0, len(config.routing.tiers) - 1
        ):
            raise ConfigError(
                f"{source}: teams.{team}.routing_thresholds: needs one fewer value than routing.tiers"
            )
    semantic = config.cache.semantic
    if semantic.enabled and (
        semantic.embedding_model is None or semantic.embedding_model not in config.models
    ):
        raise ConfigError(f"{source}: cache.semantic.embedding_model: needs one of the configured models")
    baseline = config.pricing.baseline_model
    if baseline is not None and baseline not in config.models and baseline not in config.aliases:
        raise ConfigError(f"{source}: pricing.baseline_model: unknown model '{baseline}'")
    for alias, target in config.aliases.items():
        if target not in config.models:
            raise ConfigError(f"{source}: aliases.{alias}: unknown model '{target}'")
        if alias in config.models:
            raise ConfigError(f"{source}: aliases.{alias}: a model already has this name")


def _check_routes(config: Config, source: str) -> None:
    """Each route goes somewhere that exists, has a name of its own, and thresholds that do not cross."""
    routes = config.routing.routes or ()
    if routes and not config.routing.tiers:
        raise ConfigError(f"{source}: routing.routes: needs routing.tiers")
    tiers = [tier.name for tier in config.routing.tiers]
    seen: dict[str, int] = {}
    for i, route in enumerate(routes):
        where = f"{source}: routing.routes[{i}]"
        if route.name in seen:
            raise ConfigError(
                f"{where}.name: duplicate route name '{route.name}' (also routing.routes[{seen[route.name]}])"
            )
        seen[route.name] = i
        if (route.tier is None) == (route.models is None):
            raise ConfigError(f"{where}: give either 'tier' or 'models'")
        if route.tier is not None and route.tier not in tiers:
            raise ConfigError(f"{where}.tier: unknown tier '{route.tier}' (tiers: {', '.join(tiers)})")
        for j, name in enumerate(route.models or ()):
            if name not in config.models and name not in config.aliases:
                raise ConfigError(f"{where}.models[{j}]: unknown model '{name}'")
        if route.models is not None:
            for name in ("lower_below", "raise_above"):
                if getattr(route, name) is not None:
                    raise ConfigError(f"{where}.{name}: moves a request between tiers, so needs 'tier'")
        if route.lower_below is not None and route.raise_above is not None:
            if route.lower_below > route.raise_above:
                raise ConfigError(
                    f"{where}.lower_below: {route.lower_below:g} is above raise_above {route.raise_above:g}"
                )
