"""Which forward proxy an upstream URL goes through, and the CONNECT tunnel through one.

The environment is read the way curl, urllib and httpx read it: `https_proxy` for https
upstreams, `http_proxy` for http ones, `all_proxy` for either, each lower case first, then upper
case; `no_proxy` lists what goes direct: `*` (everything), a host or a domain (`example.com` or
`.example.com`, both matching the domain and every name under it), `host:port`, an IP address or a
CIDR block (`10.0.0.0/8`, `::1`), separated by commas or spaces. Rules are chosen once per
provider at start-up and once per URL when its route is first built, never per request.

Only `http://` proxies are spoken to (TLS to the proxy itself and SOCKS are refused at start-up).
An https upstream is reached through `CONNECT host:port`, with TLS inside the tunnel (SNI and the
certificate checked for the upstream's name, not the proxy's); a plain http upstream gets
absolute-form requests (`POST http://host/path`). A proxy URL's `user:password@` becomes
`Proxy-Authorization: Basic …`.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import unquote, urlsplit

from providers.http import ConnectFailed

_MAX_REPLY = 64 << 10
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class ProxySettingError(ValueError):
    """A proxy URL that cannot be used; the message says why (the caller names the setting)."""


class ProxyRefused(ConnectFailed):
    """The proxy answered CONNECT (or a proxied request) with something other than 200: nothing
    reached the upstream. 407 and 403 will not change on a retry; a 5xx (the proxy could not reach
    the upstream) may."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Proxy:
    host: str
    port: int
    # The value of Proxy-Authorization, from the URL's userinfo; never shown.
    authorization: str | None = field(default=None, repr=False)

    @property
    def display(self) -> str:
        """The proxy as errors and logs name it: no credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @classmethod
    def parse(cls, url: str) -> Proxy:
        """`http://[user:password@]host[:port]`; a bare `host:port` means http, as curl reads it."""
        text = url.strip()
        if "://" not in text:
            text = "http://" + text
        parts = urlsplit(text)
        if parts.scheme != "http":
            raise ProxySettingError(
                f"{parts.scheme}:// proxies are not supported (only http://, which tunnels TLS with CONNECT)"
            )
        try:
            port = parts.port or 80
        except ValueError:
            raise ProxySettingError(f"{_hidden(url)} has a port that is not a number") from None
        if not parts.hostname:
            raise ProxySettingError(f"{_hidden(url)} names no host")
        if parts.path not in ("", "/") or parts.query:
            raise ProxySettingError(f"{_hidden(url)}: a proxy URL has no path")
        authorization = None
        if parts.username is not None:
            userinfo = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(userinfo.encode()).decode("ascii")
        return cls(parts.hostname, port, authorization)


def _hidden(url: str) -> str:
    return re.sub(r"//[^@/]*@", "//***@", url)


@dataclass(frozen=True, slots=True)
class _Exception:
    """One `no_proxy` entry."""

    domain: str | None = None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None

    def matches(self, host: str, address: _Address | None, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return address is not None and address.version == self.network.version and address in self.network
        assert self.domain is not None
        return host == self.domain or host.endswith("." + self.domain)


def parse_no_proxy(text: str) -> tuple[bool, tuple[_Exception, ...]]:
    """(everything bypasses, the entries); entries that parse as nothing are skipped, as curl does."""
    entries: list[_Exception] = []
    for raw in re.split(r"[,\s]+", text.strip().lower()):
        if not raw:
            continue
        if raw == "*":
            return True, ()
        entry = _entry(raw)
        if entry is not None:
            entries.append(entry)
    return False, tuple(entries)


def _entry(raw: str) -> _Exception | None:
    try:
        return _Exception(network=ipaddress.ip_network(raw.strip("[]"), strict=False))
    except ValueError:
        pass
    host, port = raw, None
    if match := re.fullmatch(r"(\[[^\]]+\]|[^:]+):(\d+)", raw):
        host, port = match.group(1), int(match.group(2))
    try:
        return _Exception(network=ipaddress.ip_network(host.strip("[]"), strict=False), port=port)
    except ValueError:
        pass
    domain = host.removeprefix("*").lstrip(".").rstrip(".")
    return _Exception(domain=domain, port=port) if domain else None


@dataclass(frozen=True, slots=True)
class ProxyRules:
    """Which proxy, if any, each upstream URL goes through. Hashable: clients are shared per rules."""

    http: Proxy | None = None
    https: Proxy | None = None
    bypass_all: bool = False
    no_proxy: tuple[_Exception, ...] = ()
    # Where the rules came from ("HTTPS_PROXY", "providers.x.proxy"…); not part of equality, so
    # providers naming the same proxy share one client and its pools.
    source: str = field(default="none", compare=False)

    @classmethod
    def fixed(cls, url: str, *, source: str) -> ProxyRules:
        """Every URL through one proxy (a provider's own `proxy:`; no_proxy does not apply)."""
        proxy = Proxy.parse(url)
        return cls(http=proxy, https=proxy, source=source)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ProxyRules:
        """The environment's proxies; raises `ProxySettingError` naming the variable at fault."""
        chosen: dict[str, Proxy | None] = {}
        sources: list[str] = []
        for scheme in ("http", "https"):
            name, value = _variable(environ, f"{scheme}_proxy") or _variable(environ, "all_proxy") or ("", "")
            try:
                chosen[scheme] = Proxy.parse(value) if value else None
            except ProxySettingError as exc:
                raise ProxySettingError(f"{name}: {exc}") from None
            if value:
                sources.append(name)
        found = _variable(environ, "no_proxy")
        bypass_all, entries = parse_no_proxy(found[1]) if found else (False, ())
        return cls(
            http=chosen["http"],
            https=chosen["https"],
            bypass_all=bypass_all,
            no_proxy=entries,
            source=", ".join(dict.fromkeys(sources)) or "none",
        )

    def choose(self, scheme: str, host: str, port: int) -> Proxy | None:
        proxy = self.https if scheme == "https" else self.http
        if proxy is None or self.bypass_all:
            return None
        if self.no_proxy:
            host = host.lower().strip("[]").rstrip(".")
            try:
                address: _Address | None = ipaddress.ip_address(host)
            except ValueError:
                address = None
            if any(entry.matches(host, address, port) for entry in self.no_proxy):
                return None
        return proxy


def _variable(environ: Mapping[str, str], name: str) -> tuple[str, str] | None:
    for key in (name, name.upper()):
        value = environ.get(key, "").strip()
        if value:
            return key, value
    return None


def connect_request(proxy: Proxy, host: str, port: int, user_agent: str) -> bytes:
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    auth = f"proxy-authorization: {proxy.authorization}\r\n" if proxy.authorization else ""
    return (
        f"CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\nuser-agent: {user_agent}\r\n{auth}\r\n"
    ).encode("latin-1")


class ConnectReply(asyncio.Protocol):
    """Reads the proxy's answer to CONNECT: a status line and headers, nothing after them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, proxy: Proxy, target: str) -> None:
        self._proxy, self._target = proxy, target
        self._buffer = b""
        self.answered: asyncio.Future[None] = loop.create_future()
        # Read here so a failure nobody waits for any more (a timed-out connect) is not reported.
        self.answered.add_done_callback(lambda done: done.cancelled() or done.exception())
        self.stray = False  # bytes after a 200, before TLS: not a tunnel to trust
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.answered.done():
            self.stray = True
            return
        self._buffer += data
        head, found, rest = self._buffer.partition(b"\r\n\r\n")
        if not found:
            if len(self._buffer) > _MAX_REPLY:
                self._fail(ConnectFailed(f"proxy {self._proxy.display} sent an overlong CONNECT reply"))
            return
        status, reason = _status(head)
        if status is None:
            self._fail(ConnectFailed(f"proxy {self._proxy.display} did not answer CONNECT in HTTP"))
        elif status != 200:
            self._fail(
                ProxyRefused(
                    f"proxy {self._proxy.display} refused CONNECT to {self._target}: {status} {reason}",
                    status=status,
                )
            )
        elif rest:
            self._fail(ConnectFailed(f"proxy {self._proxy.display} sent bytes ahead of the upstream"))
        else:
            self.answered.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"proxy {self._proxy.display} closed the connection before answering CONNECT"
        self._fail(ConnectFailed(reason))

    def _fail(self, error: Exception) -> None:
        if not self.answered.done():
            self.answered.set_exception(error)


def _status(head: bytes) -> tuple[int | None, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    match = re.fullmatch(r"HTTP/1\.[01] (\d{3})(?: (.*))?", line)
    if match is None:
        return None, ""
    return int(match.group(1)), (match.group(2) or "").strip()
