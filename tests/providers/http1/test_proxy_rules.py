"""Which proxy an upstream URL goes through, read from the environment as curl, urllib and httpx
read it, and proxy URLs that cannot be used refused with the variable named."""

from __future__ import annotations

import base64

import pytest

from providers.http1 import Http1Client
from providers.proxy import Proxy, ProxyRules, ProxySettingError

PROXY = "http://proxy.corp:3128"


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "direct"),
    [
        ("", "api.openai.com", 443, False),
        ("*", "api.openai.com", 443, True),
        ("openai.com", "api.openai.com", 443, True),  # a domain covers its subdomains
        ("openai.com", "openai.com", 443, True),
        (".openai.com", "api.openai.com", 443, True),
        ("*.openai.com", "api.openai.com", 443, True),
        ("openai.com", "notopenai.com", 443, False),  # a suffix, not a substring
        ("API.OpenAI.com", "api.openai.com", 443, True),  # case does not matter
        ("api.openai.com:8443", "api.openai.com", 443, False),  # host:port needs the port
        ("api.openai.com:443", "api.openai.com", 443, True),
        ("10.0.0.0/8", "10.1.2.3", 443, True),
        ("10.0.0.0/8", "11.1.2.3", 443, False),
        ("10.0.0.0/8", "ten.example", 443, False),  # a name is not matched against a block
        ("192.168.1.5", "192.168.1.5", 80, True),
        ("::1", "::1", 80, True),
        ("[::1]:8000", "::1", 8000, True),
        ("fd00::/8", "fd12::1", 443, True),
        ("localhost, 127.0.0.1 ,example.org", "example.org", 443, True),
        ("localhost 127.0.0.1", "127.0.0.1", 8000, True),  # spaces separate too
    ],
)
def test_no_proxy_entries(no_proxy: str, host: str, port: int, direct: bool) -> None:
    rules = ProxyRules.from_environ({"HTTPS_PROXY": PROXY, "NO_PROXY": no_proxy})
    assert (rules.choose("https", host, port) is None) == direct


def test_each_scheme_has_its_variable_lower_case_first_then_all_proxy() -> None:
    rules = ProxyRules.from_environ(
        {"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2", "ALL_PROXY": "http://all:3"}
    )
    assert rules.choose("https", "a.example", 443) == Proxy("lower", 1)
    assert rules.choose("http", "a.example", 80) == Proxy("all", 3)
    assert ProxyRules.from_environ({}).choose("https", "a.example", 443) is None


def test_a_bare_host_port_is_an_http_proxy_and_userinfo_becomes_basic_auth() -> None:
    assert Proxy.parse("proxy.corp:3128") == Proxy("proxy.corp", 3128)
    proxy = Proxy.parse("http://al%40ice:p%3Ass@proxy.corp:3128")
    assert proxy.authorization == "Basic " + base64.b64encode(b"al@ice:p:ss").decode()
    assert proxy.display == "http://proxy.corp:3128"  # what errors show: no credentials
    assert "p:ss" not in repr(proxy) and "p%3Ass" not in repr(proxy)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("socks5://proxy.corp:1080", "socks5:// proxies are not supported"),
        ("https://proxy.corp:3128", "https:// proxies are not supported"),
        ("http://u:secret@proxy.corp:port", "has a port that is not a number"),
        ("http://", "names no host"),
        ("http://proxy.corp:3128/path", "has no path"),
    ],
)
def test_an_unusable_proxy_names_the_variable_and_hides_the_password(value: str, message: str) -> None:
    with pytest.raises(ProxySettingError, match=f"^HTTPS_PROXY: .*{message}") as refused:
        ProxyRules.from_environ({"HTTPS_PROXY": value})
    assert "secret" not in str(refused.value)


async def test_providers_with_the_same_network_settings_share_one_client_and_its_pools() -> None:
    base = Http1Client()
    first = base.configured(proxies=ProxyRules.fixed(PROXY, source="providers.a.proxy"), keepalive_expiry=15)
    same = base.configured(proxies=ProxyRules.fixed(PROXY, source="providers.b.proxy"), keepalive_expiry=15)
    other = base.configured(proxies=None, keepalive_expiry=15)
    assert first is same and other is not first
    await base.aclose()
