"""Each provider's network settings (proxy, TLS files, keep-alive expiry) from `upstream.*` and the
provider's own keys, and their check at load time: a proxy URL that does not parse, a CA file
that is missing or holds no certificate, a client key that is not the certificate's, each named by
its YAML path before anything is served (`check-config`, start-up and reloads alike)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.config.providers import LiteLLMProvider, ProviderConfig, TLSConfig
from gateway.config.schema import Config
from providers.proxy import ProxyRules, ProxySettingError
from providers.tls import TLSSettingError, TLSSettings, tls_context

# Below the idle timeouts upstreams keep (uvicorn, which vLLM serves on: 5 s; nginx: 75 s; the
# managed APIs' load balancers: 60 s and more), with room for a FIN still in flight.
VLLM_KEEPALIVE_EXPIRY = 4.0
KEEPALIVE_EXPIRY = 15.0
_DIRECT = ("", "none")


class NetworkSettingError(ValueError):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


@dataclass(frozen=True, slots=True)
class ProviderNetwork:
    # None: the environment's HTTPS_PROXY/HTTP_PROXY/NO_PROXY, read once by the shared client.
    proxies: ProxyRules | None
    tls: TLSSettings
    keepalive_expiry: float


def provider_network(config: Config, name: str, spec: ProviderConfig) -> ProviderNetwork:
    """Raises `NetworkSettingError` for a proxy URL that cannot be used (files are not read here)."""
    return ProviderNetwork(
        proxies=_proxies(config, name, spec),
        tls=_tls(config.upstream.tls, spec.tls),
        keepalive_expiry=spec.keepalive_expiry_seconds
        or config.upstream.keepalive_expiry_seconds
        or (VLLM_KEEPALIVE_EXPIRY if spec.type == "vllm" else KEEPALIVE_EXPIRY),
    )


def check_network(config: Config, environ: Mapping[str, str]) -> None:
    """Everything `provider_network` and the client will need, tried once; raises
    `NetworkSettingError` naming the first setting at fault."""
    tried: set[TLSSettings] = {TLSSettings()}  # the default trust needs no file
    inherits_environment = False
    for name, spec in config.providers.items():
        if isinstance(spec, LiteLLMProvider):
            continue
        network = provider_network(config, name, spec)
        inherits_environment |= network.proxies is None
        if network.tls not in tried:
            tried.add(network.tls)
            try:
                tls_context(network.tls)
            except TLSSettingError as exc:
                raise NetworkSettingError(_tls_path(config, name, spec, exc.setting), exc.message) from None
    if inherits_environment:
        try:
            ProxyRules.from_environ(environ)
        except ProxySettingError as exc:
            raise NetworkSettingError("environment", str(exc)) from None


def _proxies(config: Config, name: str, spec: ProviderConfig) -> ProxyRules | None:
    for where, owner in ((f"providers.{name}.proxy", spec), ("upstream.proxy", config.upstream)):
        if "proxy" not in owner.model_fields_set:
            continue
        value = (owner.proxy or "").strip()
        if value.lower() in _DIRECT:
            return ProxyRules(source=where)
        try:
            return ProxyRules.fixed(value, source=where)
        except ProxySettingError as exc:
            raise NetworkSettingError(where, str(exc)) from None
    return None


def _tls(default: TLSConfig, own: TLSConfig | None) -> TLSSettings:
    fields = default.model_dump()
    if own is not None:
        fields.update({key: getattr(own, key) for key in own.model_fields_set})
    return TLSSettings(**fields)


def _tls_path(config: Config, name: str, spec: ProviderConfig, setting: str) -> str:
    """Where the file at fault was given: the provider's own `tls`, else `upstream.tls`."""
    first = setting.split("/")[0]
    if spec.tls is not None and first in spec.tls.model_fields_set:
        return f"providers.{name}.tls.{setting}"
    return f"upstream.tls.{setting}"
