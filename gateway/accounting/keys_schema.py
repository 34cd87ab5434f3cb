"""The `virtual_keys` table, declared on the ledger's `metadata` so Alembic sees one schema.

A key is stored only as the SHA-256 of its plaintext (`key_hash`, unique) and its visible prefix;
there is deliberately no column that could hold the plaintext. `allowed_models` is a JSON array
(NULL: whatever the team allows); budgets are integer nano-USD like every amount in the ledger
(NULL: no per-key budget); `metadata` is a JSON object of free-form labels.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Index, Integer, String, Table, Text

from gateway.accounting.schema import metadata

virtual_keys = Table(
    "virtual_keys",
    metadata,
    Column("id", String(64), primary_key=True),  # `key_<hex>`, what the ledger's `key_id` holds
    Column("key_hash", String(64), nullable=False),
    Column("prefix", String(32), nullable=False),
    Column("team", String(128), nullable=False),
    Column("name", String(256), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("allowed_models", Text, nullable=True),
    Column("budget_daily_nano", BigInteger, nullable=True),
    Column("budget_monthly_nano", BigInteger, nullable=True),
    Column("rpm", Integer, nullable=True),
    Column("tpm", Integer, nullable=True),
    Column("metadata", Text, nullable=False),
    Index("ux_virtual_keys_key_hash", "key_hash", unique=True),
    Index("ix_virtual_keys_team", "team"),
)
