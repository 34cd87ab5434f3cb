"""Resilience facts on each ledger row: the deployments tried, whether a fallback answered, whether
usage was estimated, the cache status and the idempotency key.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.add_column(sa.Column("deployments_tried", sa.Text, nullable=True))
        table.add_column(sa.Column("fallback_used", sa.Boolean, nullable=False, server_default=sa.false()))
        table.add_column(sa.Column("usage_estimated", sa.Boolean, nullable=False, server_default=sa.false()))
        table.add_column(sa.Column("cache_status", sa.String(32), nullable=True))
        table.add_column(sa.Column("idempotency_key", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as table:
        for column in ("idempotency_key", "cache_status", "usage_estimated", "fallback_used", "deployments_tried"):
            table.drop_column(column)
