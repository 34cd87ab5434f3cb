"""The router's complexity score on each ledger row (the tier and the reason are already there).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.add_column(sa.Column("route_score", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.drop_column("route_score")
