"""The Batch API's tables (migration 0010): uploaded files, batches and their items.

File contents live in the database, so every replica can serve them and a restart loses nothing.
An item's key is (batch_id, custom_id): its ledger row is written in the same transaction that
marks it done, and only if it was not done yet, so no item is ever billed twice.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    false,
)

from gateway.accounting.schema import metadata

batch_files = Table(
    "batch_files",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("team", String(128), nullable=True),
    Column("purpose", String(32), nullable=False),  # batch, batch_output
    Column("filename", String(512), nullable=False),
    Column("bytes", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("content", LargeBinary, nullable=False),
)

batches = Table(
    "batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("team", String(128), nullable=True),
    Column("key_id", String(64), nullable=True),
    Column("dialect", String(16), nullable=False),  # the client's shape: openai or anthropic
    Column("endpoint", String(64), nullable=False),
    Column("model", String(256), nullable=False),  # the public model every item names
    Column("mode", String(16), nullable=False),  # openai, anthropic (the provider's batch API) or local
    Column("provider", String(128), nullable=False),
    Column("upstream_model", String(256), nullable=False),
    Column("upstream_id", String(128), nullable=True),  # the provider's batch id
    Column("input_file_id", String(64), nullable=True),
    Column("output_file_id", String(64), nullable=True),
    Column("error_file_id", String(64), nullable=True),
    Column("status", String(32), nullable=False),
    Column("completion_window", String(16), nullable=False),
    Column("metadata", Text, nullable=True),  # JSON object
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("in_progress_at", DateTime(timezone=True), nullable=True),
    Column("finalizing_at", DateTime(timezone=True), nullable=True),
    Column("completed_at", DateTime(timezone=True), nullable=True),
    Column("failed_at", DateTime(timezone=True), nullable=True),
    Column("expired_at", DateTime(timezone=True), nullable=True),
    Column("cancelling_at", DateTime(timezone=True), nullable=True),
    Column("cancelled_at", DateTime(timezone=True), nullable=True),
    Column("total", Integer, nullable=False),
    Column("completed", Integer, nullable=False, server_default="0"),
    Column("failed", Integer, nullable=False, server_default="0"),
    # The budget: the worst case reserved at submission, the budgets it is held on (JSON), and
    # whether what was left of it has been given back.
    Column("reserved_nano", BigInteger, nullable=False),
    Column("budgets", Text, nullable=True),
    Column("released", Boolean, nullable=False, server_default=false()),
    Column("tags", Text, nullable=True),  # JSON array, for the items' ledger rows
    Column("lease_owner", String(64), nullable=True),
    Column("lease_until", DateTime(timezone=True), nullable=True),
    Index("ix_batches_team_created", "team", "created_at"),
    Index("ix_batches_status", "status"),
)

batch_items = Table(
    "batch_items",
    metadata,
    Column("batch_id", String(64), primary_key=True),
    Column("custom_id", String(256), primary_key=True),
    Column("line", Integer, nullable=False),
    Column("body", Text, nullable=False),  # the request in the batch's dialect, JSON
    Column("worst_nano", BigInteger, nullable=False),
    Column("state", String(16), nullable=False),  # pending, done, failed, cancelled, expired
    Column("status_code", Integer, nullable=True),
    Column("response", Text, nullable=True),  # the answer in the batch's dialect, JSON
    Column("error", Text, nullable=True),  # JSON {code, message}
    Column("request_id", String(36), nullable=True),  # the ledger row
    Column("cost_nano", BigInteger, nullable=False, server_default="0"),
    Index("ix_batch_items_state", "batch_id", "state", "line"),
)
