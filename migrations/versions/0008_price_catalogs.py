"""Price catalog versions stored in the database (`tollgate prices update`), which every replica
prices with unless `pricing.catalog` pins another; ledger rows name theirs in `price_version`.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "price_catalogs",
        sa.Column("version", sa.String(128), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(1024), nullable=False),
        sa.Column("models", sa.Integer, nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("price_catalogs")
