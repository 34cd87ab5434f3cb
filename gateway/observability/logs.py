"""How the process logs: one line per record, as text for people or as one JSON object for log
collectors (`tollgate serve --log-format json`), for Tollgate's loggers and uvicorn's alike.

Set up once per process (the CLI, and each spawned worker), on the root logger; uvicorn is started
with `log_config=None` so its loggers propagate here instead of printing in their own format.
A record's `fields` extra (a dict, as the access log passes it) becomes top-level JSON keys or
`name=value` pairs in text: what a collector indexes, never prompt text or keys.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from gateway.observability.redaction import redact_request_target

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
FORMAT_ENV = "TOLLGATE_LOG_FORMAT"
ACCESS_LOGGER = "tollgate.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# A line per upstream call or per migration step drowns the lines operators need.
_NOISY = ("httpx", "httpcore", "alembic")
# uvicorn's own loggers: their handlers (if a library set any) go, so they print through ours.
# Not `uvicorn.access`: uvicorn turns it off (`access_log=False`) by unhooking it, which must stick.
_UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.asgi")


def log_format(configured: str | None, environ: Mapping[str, str]) -> LogFormat:
    """`--log-format` wins over `TOLLGATE_LOG_FORMAT`; text when neither says. An unknown value in the
    environment is refused by name rather than silently ignored."""
    value = (configured or environ.get(FORMAT_ENV) or "text").strip().lower()
    if value == "json":
        return "json"
    if value == "text":
        return "text"
    raise ValueError(f"{FORMAT_ENV}={value!r}: the log format is one of text, json")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp (UTC, ISO 8601), level, logger, message, then any `fields`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": _message(record),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """The classic line, with an access record's fields appended as `name=value`."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            text += "".join(f" {name}={value}" for name, value in fields.items() if value is not None)
        return text


def configure_logging(level: str, fmt: LogFormat = "text", *, access_log: bool = False) -> None:
    """The root handler in `fmt`; uvicorn's loggers printing through it; the access log on or off."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in _UVICORN:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.INFO if access_log else logging.WARNING)


def _message(record: logging.LogRecord) -> str:
    message = record.getMessage()
    # uvicorn's access line quotes the request target; the filter on its logger has scrubbed the
    # args, but a record built elsewhere may not have passed it.
    return redact_request_target(message) if record.name == "uvicorn.access" else message
