"""Raw ledger rows out to a file a warehouse loads (`tollgate ledger export`): CSV with the standard
library, Parquet with pyarrow (the `tollgate[export]` extra).

Rows are streamed from a server-side cursor in batches and each batch is written before the next is
fetched, so a day of 100M rows never sits in memory. The file appears under its name only once
complete: it is written as `<out>.partial` and renamed at the end.
"""

from __future__ import annotations

import csv
import os
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import BigInteger, Boolean, DateTime, Float, Integer, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.schema import requests

BATCH_ROWS = 10_000
COLUMNS = tuple(column.name for column in requests.columns)
FORMATS = ("csv", "parquet")


class MissingExtra(RuntimeError):
    """The format needs a package that is not installed; the message says which extra brings it."""


class _Sink(Protocol):
    def write(self, rows: Sequence[Any]) -> None: ...
    def close(self) -> None: ...


async def ledger_batches(
    engine: AsyncEngine, since: datetime, until: datetime, *, batch_rows: int = BATCH_ROWS
) -> AsyncIterator[Sequence[Any]]:
    """Rows created in [since, until), oldest first, `batch_rows` at a time."""
    query = (
        select(requests)
        .where(requests.c.created_at >= since, requests.c.created_at < until)
        .order_by(requests.c.created_at, requests.c.id)
        .execution_options(yield_per=batch_rows)
    )
    async with engine.connect() as conn:
        result = await conn.stream(query)
        async for batch in result.partitions(batch_rows):
            yield batch


async def export_ledger(
    engine: AsyncEngine,
    since: datetime,
    until: datetime,
    *,
    fmt: str,
    out: Path,
    batch_rows: int = BATCH_ROWS,
) -> int:
    """Write the rows to `out` in `fmt`; returns how many."""
    partial = out.with_name(out.name + ".partial")
    sink = _ParquetSink(partial) if fmt == "parquet" else _CsvSink(partial)
    written = 0
    try:
        async for batch in ledger_batches(engine, since, until, batch_rows=batch_rows):
            sink.write(batch)
            written += len(batch)
        sink.close()
    except BaseException:
        sink.close()
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, out)
    return written


def require_format(fmt: str) -> None:
    """Fail before touching the database when the format's package is missing."""
    if fmt == "parquet":
        _pyarrow()


def _pyarrow() -> Any:
    try:
        import pyarrow  # type: ignore[import-untyped]
        import pyarrow.parquet  # type: ignore[import-untyped]
    except ImportError:
        raise MissingExtra(
            "--format parquet needs pyarrow, which is not installed: pip install 'tollgate[export]'"
        ) from None
    return pyarrow


class _CsvSink:
    """RFC 4180 CSV with a header; NULL is an empty field, booleans true/false, times ISO 8601."""

    def __init__(self, path: Path) -> None:
        self._handle = path.open("w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._handle)
        self._writer.writerow(COLUMNS)

    def write(self, rows: Sequence[Any]) -> None:
        self._writer.writerows([_csv_cell(value) for value in row] for row in rows)

    def close(self) -> None:
        self._handle.close()


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):  # SQLite hands times back naive; they are UTC
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value


class _ParquetSink:
    """One row group per batch, zstd-compressed, with the ledger's column types."""

    def __init__(self, path: Path) -> None:
        pa = _pyarrow()
        self._pa = pa
        self._schema = pa.schema([(column.name, _arrow_type(pa, column.type)) for column in requests.columns])
        self._writer = pa.parquet.ParquetWriter(str(path), self._schema, compression="zstd")

    def write(self, rows: Sequence[Any]) -> None:
        columns = list(zip(*rows, strict=True))
        fields = list(self._schema)
        arrays = [self._pa.array(values, type=f.type) for values, f in zip(columns, fields, strict=True)]
        self._writer.write_table(self._pa.Table.from_arrays(arrays, schema=self._schema))

    def close(self) -> None:
        self._writer.close()


def _arrow_type(pa: Any, sql_type: Any) -> Any:
    if isinstance(sql_type, DateTime):
        return pa.timestamp("us", tz="UTC")
    if isinstance(sql_type, Boolean):
        return pa.bool_()
    if isinstance(sql_type, BigInteger):
        return pa.int64()
    if isinstance(sql_type, Integer):
        return pa.int32()
    if isinstance(sql_type, Float):
        return pa.float64()
    return pa.string()
