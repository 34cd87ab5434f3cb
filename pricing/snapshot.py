"""`python -m pricing.snapshot`: write the table the package ships, `pricing/data/prices-<date>.json`,
from a LiteLLM price file (by default the installed litellm's, read as data), trimmed to the fields
Tollgate reads. Run by a maintainer before a release; the gateway never runs it."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

from pricing.catalog import DATA_DIR, TABLE_GLOB
from pricing.table import TableError, parse_table

LITELLM_TABLE = "litellm/model_prices_and_context_window_backup.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pricing.snapshot", description=__doc__)
    parser.add_argument("--from", dest="source", type=Path, help="a LiteLLM price file (default: litellm's)")
    parser.add_argument("--date", help="the day the prices were taken (default: today)")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="directory to write to")
    args = parser.parse_args(argv)
    path, label = args.source, f"file {args.source}"
    if path is None:
        distribution = importlib.metadata.distribution("litellm")
        path = Path(str(distribution.locate_file(LITELLM_TABLE)))
        label = f"litellm {distribution.version} {Path(LITELLM_TABLE).name}"
    try:
        table = parse_table(path.read_bytes(), source=label, date=args.date)
    except (OSError, TableError) as exc:
        sys.stderr.write(f"price table {path}: {exc}\n")
        return 1
    for old in args.out.glob(TABLE_GLOB):  # one shipped table at a time: the newest is the one read
        old.unlink()
    target = args.out / f"prices-{table.date}.json"
    target.write_bytes(table.to_json() + b"\n")
    sys.stdout.write(
        f"wrote {target}: {len(table.models)} models ({table.priced()} priced), {table.version}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
