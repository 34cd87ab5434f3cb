"""The ledger: one row per request.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "requests",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("client_request_id", sa.String(128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requested_model", sa.String(256), nullable=False),
        sa.Column("model", sa.String(256), nullable=True),
        sa.Column("provider", sa.String(128), nullable=True),
        sa.Column("upstream_model", sa.String(256), nullable=True),
        sa.Column("tier", sa.String(64), nullable=True),
        sa.Column("stream", sa.Boolean, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("error_type", sa.String(64), nullable=True),
        sa.Column("error_message", sa.Text, nullable=True),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("cached_tokens", sa.Integer, nullable=False),
        sa.Column("cache_write_tokens", sa.Integer, nullable=False),
        sa.Column("reasoning_tokens", sa.Integer, nullable=False),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("ttft_ms", sa.Float, nullable=True),
        sa.Column("cost_nano", sa.BigInteger, nullable=False),
        sa.Column("price_source", sa.String(64), nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
    )
    op.create_index("ix_requests_created_at", "requests", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_requests_created_at", table_name="requests")
    op.drop_table("requests")
