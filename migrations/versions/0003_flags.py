"""Policy flags on each ledger row: a soft budget passed, a temperature capped.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.add_column(sa.Column("flags", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.drop_column("flags")
