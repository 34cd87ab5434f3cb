"""Secrets scrubbed out of text the gateway did not write itself: an upstream's error message can
echo the credential it was sent (a misbehaving or compromised provider, a proxy that dumps its
request), and that message would otherwise reach the client, the ledger, the logs and the traces.

The known secrets are the configured provider keys and the admin key, replaced whole; anything
shaped like a virtual key keeps its visible prefix (`tg-ab12cd34_…`) and loses the rest.

The access log gets a filter of its own: a client that sends its key in the query string
(`?key=`, as Gemini's API takes it) would otherwise have it written to disk by uvicorn's access log,
which prints every request target verbatim when an operator turns it on.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from gateway.config.schema import Config
from providers.errors import ProviderError

REDACTED = "[redacted]"
_VIRTUAL_KEY = re.compile(r"(tg-[a-z0-9]{8})_[A-Za-z0-9_-]{16,}")
# A query parameter whose name says it carries a credential: its value is never logged.
_CREDENTIAL_PARAM = re.compile(
    r"([?&][^=&\s]*(?:key|token|secret|auth|password|credential|signature)[^=&\s]*=)[^&\s]*", re.IGNORECASE
)
ACCESS_LOGGER = "uvicorn.access"
# Shorter "secrets" (a test's "k") would turn ordinary words into [redacted]; real keys are longer.
_MIN_SECRET = 8


class Redactor:
    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a key that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True)

    @classmethod
    def from_config(cls, config: Config) -> Redactor:
        keys = [p.api_key.get_secret_value() for p in config.providers.values() if p.api_key is not None]
        if config.auth.admin_key is not None:
            keys.append(config.auth.admin_key.get_secret_value())
        return cls(keys)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        if "tg-" in text:
            text = _VIRTUAL_KEY.sub(r"\1_…", text)
        return text

    def provider_error(self, exc: ProviderError) -> ProviderError:
        """Scrub `exc` in place: its message is what clients, the ledger and spans are shown. The
        exceptions it was raised from (an SDK's, quoting the upstream) are dropped if they hold a
        secret, since tracebacks in logs and spans print the whole chain."""
        clean = self.text(exc.message)
        if clean != exc.message:
            exc.message = clean
            exc.args = (clean,)
        if any(self.text(text) != text for text in _chain(exc)):
            exc.__cause__ = exc.__context__ = None
            exc.__suppress_context__ = True
        return exc


def _chain(exc: BaseException) -> Iterable[str]:
    seen: set[int] = set()
    link = exc.__cause__ or exc.__context__
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield repr(link)
        yield str(link)
        link = link.__cause__ or link.__context__


def redact_request_target(text: str) -> str:
    """A logged URL or request line with credential-like query values and virtual keys removed."""
    if "?" in text:
        text = _CREDENTIAL_PARAM.sub(rf"\1{REDACTED}", text)
    if "tg-" in text:
        text = _VIRTUAL_KEY.sub(r"\1_…", text)
    return text


class AccessLogFilter(logging.Filter):
    """Scrubs uvicorn's access-log records (args: client, method, target, version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_request_target(a) if isinstance(a, str) else a for a in record.args)
        return True


def install_access_log_filter() -> None:
    """Once per process: the filter sits on the emitting logger, so every handler sees clean records."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, AccessLogFilter) for f in logger.filters):
        logger.addFilter(AccessLogFilter())
