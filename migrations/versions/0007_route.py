"""The task route an `auto` request matched (`routing.routes`), beside its tier, score and reason.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.add_column(sa.Column("route", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.drop_column("route")
