"""YAML → `Config`: `${NAME}` secrets from the environment, cross-references checked, and every
problem reported with the YAML path of the field at fault."""

from __future__ import annotations

import difflib
import os
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gateway.config.network import NetworkSettingError, check_network
from gateway.config.schema import Config
from providers.litellm_adapter import litellm_installed

ADMIN_KEY_ENV = "TOLLGATE_ADMIN_KEY"
METRICS_TOKEN_ENV = "TOLLGATE_METRICS_TOKEN"
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
        raise ConfigError(f"{source}: not valid YAML{_yaml_where(exc)}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections")
    return build_config(raw, source=source, environ=environ)


def build_config(
    raw: dict[str, Any], *, source: str = "<config>", environ: Mapping[str, str] | None = None
) -> Config:
    env = os.environ if environ is None else environ
    expanded = _with_admin_key_from(env, _expand_env(raw, env, path=(), source=source))
    try:
        config = Config.model_validate(expanded)
    except ValidationError as exc:
        problems = [_problem(error) for error in exc.errors()]
        if len(problems) == 1:
            raise ConfigError(f"{source}: {problems[0]}") from exc
        listed = "".join(f"\n  - {problem}" for problem in problems)
        raise ConfigError(f"{source}: {len(problems)} problems:{listed}") from exc
    _check_references(config, source)
    _check_extras(config, source)
    try:
        check_network(config, env)
    except NetworkSettingError as exc:
        raise ConfigError(f"{source}: {exc.where}: {exc.message}") from None
    return config


def _with_admin_key_from(environ: Mapping[str, str], raw: dict[str, Any]) -> dict[str, Any]:
    """`TOLLGATE_ADMIN_KEY` is the admin key, and `TOLLGATE_METRICS_TOKEN` the /metrics token, when
    the config names none, with or without a file (a Kubernetes Secret arrives as environment)."""
    for env_name, section, key in (
        (ADMIN_KEY_ENV, "auth", "admin_key"),
        (METRICS_TOKEN_ENV, "observability", "metrics_token"),
    ):
        value = environ.get(env_name)
        current = raw.get(section)
        if value and not (isinstance(current, dict) and current.get(key)):
            raw = {**raw, section: {**(current if isinstance(current, dict) else {}), key: value}}
    return raw


def _problem(error: Any) -> str:
    """One validation error as `where: what`, an unknown key with the nearest known one."""
    where = format_path(error["loc"])
    if error["type"] != "extra_forbidden":
        return f"{where}: {error['msg']}"
    key = str(error["loc"][-1])
    known = _known_keys(error["loc"][:-1])
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"{where}: unknown key '{key}'{hint}"


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the section at `loc` takes, found by walking the schema along the path."""
    annotation: Any = Config
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    fields = _fields(annotation)
    return list(fields) if fields else []


def _step(annotation: Any, part: int | str) -> Any:
    """The annotation one step down `annotation` at `part`: a model's field, a mapping's value, a
    sequence's item, or whichever member of a union has it."""
    fields = _fields(annotation)
    if fields is not None:
        field = fields.get(part) if isinstance(part, str) else None
        return field.annotation if field is not None else None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (dict, Mapping) and len(args) == 2:
        return args[1]
    if origin in (list, tuple) and args and isinstance(part, int):
        return args[0]
    for arg in args:
        found = _step(arg, part)
        if found is not None:
            return found
    return None


def _fields(annotation: Any) -> dict[str, Any] | None:
    fields = getattr(annotation, "model_fields", None)
    return fields if isinstance(fields, dict) and isinstance(annotation, type) else None


def _yaml_where(exc: yaml.YAMLError) -> str:
    """Where in the file YAML gave up, and why, without PyYAML's `in "<unicode string>"`."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{at}: {problem}"


def _check_extras(config: Config, source: str) -> None:
    """An optional extra a provider type needs is installed (litellm: 40 packages, ~290 MB, that
    the default install leaves out); said at check-config and start-up, not at the first request."""
    for name, spec in config.providers.items():
        if spec.type == "litellm" and not litellm_installed():
            raise ConfigError(
                f"{source}: providers.{name}: type litellm needs the optional extra, which is not "
                "installed: pip install 'tollgate[litellm]'"
            )


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
