"""Proxy and TLS settings are checked when the config loads: a file that is missing, does not parse
or does not match fails with the setting's YAML path (in `check-config` and at start-up), never at
the first request, and never by waiting on a passphrase prompt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.loader import ConfigError, parse_config
from gateway.config.network import provider_network
from gateway.config.schema import Config
from providers.proxy import Proxy
from providers.tls import TLSSettings
from tests.providers.http1.network_rig import PrivateCA

BASE = """
providers:
  openai: {type: openai, base_url: "https://api.openai.com/v1"%s}
  local: {type: vllm, base_url: "http://127.0.0.1:8000/v1"}
models:
  gpt-4o: {provider: openai, price: {input_per_mtok: "2.5", output_per_mtok: "10"}}
"""


def config_text(provider_extra: str = "", top: str = "") -> str:
    return BASE % (", " + provider_extra if provider_extra else "") + top


def load(text: str, environ: dict[str, str] | None = None) -> Config:
    return parse_config(text, source="t.yaml", environ=environ or {})


def refused(text: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(text, environ)
    return str(caught.value)


@pytest.fixture
def ca(tmp_path: Path) -> PrivateCA:
    return PrivateCA(tmp_path)


def test_a_missing_ca_file_is_named(tmp_path: Path) -> None:
    message = refused(config_text(f'tls: {{ca_file: "{tmp_path}/nope.pem"}}'))
    assert message == f"t.yaml: providers.openai.tls.ca_file: {tmp_path}/nope.pem does not exist"


def test_a_ca_file_that_does_not_parse_is_named_globally_or_per_provider(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    top = f'upstream: {{tls: {{ca_file: "{junk}"}}}}\n'
    assert refused(config_text(top=top)).startswith(
        f"t.yaml: upstream.tls.ca_file: {junk} holds no PEM certificate that parses"
    )
    own = refused(config_text(f'tls: {{ca_file: "{junk}"}}'))
    assert own.startswith("t.yaml: providers.openai.tls.ca_file: ")


def test_a_key_that_is_not_the_certificates_is_named(ca: PrivateCA) -> None:
    cert, _ = ca.issue("gateway", client=True)
    _, other_key = ca.issue("someone-else", client=True)
    message = refused(config_text(f'tls: {{cert_file: "{cert}", key_file: "{other_key}"}}'))
    assert message == f"t.yaml: providers.openai.tls.key_file: {other_key} is not the key of {cert}"


def test_an_encrypted_key_is_refused_not_prompted_for(ca: PrivateCA) -> None:
    cert, key = ca.issue("gateway", client=True, passphrase=b"hunter2")
    message = refused(config_text(f'tls: {{cert_file: "{cert}", key_file: "{key}"}}'))
    assert "providers.openai.tls.key_file: " in message and "is encrypted" in message


def test_a_key_file_alone_or_replace_without_a_ca_file_is_refused() -> None:
    assert "providers.openai.tls: Value error, 'key_file' needs 'cert_file'" in refused(
        config_text('tls: {key_file: "/k.pem"}')
    )
    assert "ca_mode 'replace' needs 'ca_file'" in refused(config_text("tls: {ca_mode: replace}"))


def test_an_unusable_proxy_is_named_by_its_setting_or_variable() -> None:
    assert refused(config_text('proxy: "socks5://p:1080"')) == (
        "t.yaml: providers.openai.proxy: socks5:// proxies are not supported "
        "(only http://, which tunnels TLS with CONNECT)"
    )
    assert refused(config_text(), {"HTTPS_PROXY": "http://p:xx"}).startswith(
        "t.yaml: environment: HTTPS_PROXY: http://p:xx has a port that is not a number"
    )
    litellm = config_text().replace("  local:", '  long: {type: litellm, proxy: "http://p:1"}\n  local:')
    assert (
        "providers.long: Value error, 'proxy', 'tls' and 'keepalive_expiry_seconds' do not apply"
        in refused(litellm)
    )


def test_good_settings_resolve_per_provider(ca: PrivateCA) -> None:
    cert, key = ca.issue("gateway", client=True)
    text = config_text(
        f'proxy: "http://u:pw@proxy.corp:3128", tls: {{cert_file: "{cert}", key_file: "{key}"}}',
        top=f'upstream: {{tls: {{ca_file: "{ca.ca_file}"}}, keepalive_expiry_seconds: 20}}\n',
    )
    config = load(text)
    openai = provider_network(config, "openai", config.providers["openai"])
    assert openai.proxies is not None and openai.proxies.https == Proxy.parse("http://u:pw@proxy.corp:3128")
    assert openai.tls == TLSSettings(ca_file=str(ca.ca_file), cert_file=str(cert), key_file=str(key))
    assert openai.keepalive_expiry == 20
    local = provider_network(config, "local", config.providers["local"])
    assert local.proxies is None  # the environment's
    assert local.tls == TLSSettings(ca_file=str(ca.ca_file))


def test_proxy_none_or_empty_goes_direct_and_keepalive_defaults_by_type() -> None:
    for value in ("none", '""', ""):
        config = load(config_text(f"proxy: {value}"))
        network = provider_network(config, "openai", config.providers["openai"])
        assert network.proxies is not None and network.proxies.https is None
        assert network.keepalive_expiry == 15.0
    local = provider_network(config, "local", config.providers["local"])
    assert local.keepalive_expiry == 4.0  # vLLM serves on uvicorn, whose keep-alive is 5 s


def test_check_config_names_the_bad_file_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(config_text(f'tls: {{ca_file: "{tmp_path}/corp-root.pem"}}'))
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli.main", "check-config", str(bad)],
        capture_output=True, text=True, timeout=60, env={"PATH": ""},
    )  # fmt: skip
    assert result.returncode == 1
    assert f"providers.openai.tls.ca_file: {tmp_path}/corp-root.pem does not exist" in result.stderr
    assert "Traceback" not in result.stderr
