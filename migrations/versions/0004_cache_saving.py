"""What caching saved on each request (against the same tokens at the uncached price), and its daily total.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.add_column(sa.Column("cache_saving_nano", sa.BigInteger, nullable=False, server_default="0"))
    with op.batch_alter_table("spend_daily") as table:
        table.add_column(sa.Column("cache_saving_nano", sa.BigInteger, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("spend_daily") as table:
        table.drop_column("cache_saving_nano")
    with op.batch_alter_table("requests") as table:
        table.drop_column("cache_saving_nano")
