"""Whom the upstream client trusts over TLS and who it is to the upstream (mTLS): one
`ssl.SSLContext` per provider, built once at start-up from files named in the config.

Default trust is the system store (what `ssl.create_default_context()` loads: the distribution's
bundle, where a corporate root installed with `update-ca-certificates` lands) plus certifi's
Mozilla roots, so a slim image without a system bundle still reaches the public APIs. A `ca_file`
is added to that, or replaces it (`ca_mode: replace`) when only a private CA may be trusted.

Every file problem is a `TLSSettingError` naming the setting, raised where the config is loaded,
so `tollgate check-config`, start-up and a reload say which file is wrong instead of the first
request failing. A key file with a passphrase is refused, never prompted for: OpenSSL's default
callback reads the terminal, which would hang a server.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import certifi


class TLSSettingError(ValueError):
    """A TLS file that cannot be used; `setting` is its key under `tls` (e.g. `ca_file`)."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting
        self.message = message


@dataclass(frozen=True, slots=True)
class TLSSettings:
    ca_file: str | None = None
    ca_mode: Literal["add", "replace"] = "add"
    cert_file: str | None = None
    key_file: str | None = None


def tls_context(settings: TLSSettings | None = None) -> ssl.SSLContext:
    """A client context that checks the upstream's certificate and name; raises `TLSSettingError`."""
    settings = settings or TLSSettings()
    if settings.ca_mode == "replace" and settings.ca_file is None:
        raise TLSSettingError("ca_mode", "'replace' needs a ca_file to trust instead")
    if settings.ca_file is not None and settings.ca_mode == "replace":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname checked, certificate required
    else:
        context = ssl.create_default_context()
        context.load_verify_locations(cafile=certifi.where())
    if settings.ca_file is not None:
        _load_ca(context, _readable("ca_file", settings.ca_file))
    if settings.cert_file is not None or settings.key_file is not None:
        _load_identity(context, settings)
    context.set_alpn_protocols(["http/1.1"])
    return context


def _load_ca(context: ssl.SSLContext, path: Path) -> None:
    try:
        context.load_verify_locations(cafile=str(path))
    except ssl.SSLError as exc:
        raise TLSSettingError("ca_file", f"{path} holds no PEM certificate that parses ({exc})") from None


def _load_identity(context: ssl.SSLContext, settings: TLSSettings) -> None:
    if settings.cert_file is None:
        raise TLSSettingError("key_file", "given without cert_file")
    cert = _readable("cert_file", settings.cert_file)
    key = _readable("key_file", settings.key_file) if settings.key_file is not None else None
    if b"ENCRYPTED" in (key or cert).read_bytes():
        where = "key_file" if key is not None else "cert_file"
        raise TLSSettingError(where, f"{key or cert} is encrypted; give the key without a passphrase")
    try:
        context.load_cert_chain(str(cert), str(key) if key else None, password=_no_passphrase)
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise TLSSettingError("key_file", f"{key or cert} is not the key of {cert}") from None
        where = "cert_file" if key is None else "cert_file/key_file"
        raise TLSSettingError(where, f"{cert} with {key or 'no key_file'} does not load ({exc})") from None


def _no_passphrase() -> bytes:
    return b""


def _readable(setting: str, name: str) -> Path:
    path = Path(name)
    if not path.exists():
        raise TLSSettingError(setting, f"{path} does not exist")
    if not path.is_file():
        raise TLSSettingError(setting, f"{path} is not a file (give one PEM file)")
    try:
        path.read_bytes()
    except OSError as exc:
        raise TLSSettingError(setting, f"cannot read {path}: {exc.strerror or exc}") from None
    return path
