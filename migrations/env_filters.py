"""What Alembic's autogenerate compares: not the daily partitions of `requests` (the writer makes
them at run time), only the tables the code declares."""

from __future__ import annotations

from typing import Any

PARTITION_PREFIXES = ("requests_p", "requests_default")


def include_name(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    if type_ == "table" and name is not None:
        return not name.startswith(PARTITION_PREFIXES)
    if type_ == "index":
        table = parent_names.get("table_name") or ""
        return not str(table).startswith(PARTITION_PREFIXES)
    return True
