"""Virtual keys: stored as a SHA-256 hash and a visible prefix, never in plaintext.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "virtual_keys",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(32), nullable=False),
        sa.Column("team", sa.String(128), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("allowed_models", sa.Text, nullable=True),
        sa.Column("budget_daily_nano", sa.BigInteger, nullable=True),
        sa.Column("budget_monthly_nano", sa.BigInteger, nullable=True),
        sa.Column("rpm", sa.Integer, nullable=True),
        sa.Column("tpm", sa.Integer, nullable=True),
        sa.Column("metadata", sa.Text, nullable=False),
    )
    op.create_index("ux_virtual_keys_key_hash", "virtual_keys", ["key_hash"], unique=True)
    op.create_index("ix_virtual_keys_team", "virtual_keys", ["team"])


def downgrade() -> None:
    op.drop_table("virtual_keys")
