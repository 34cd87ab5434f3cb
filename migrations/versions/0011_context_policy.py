"""What the context policy left out of each prompt (trimmed and deduped tokens) and what that saved at
the answering model's input price, per row and in the daily rollup.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table_name, tokens_type in (("requests", sa.Integer), ("spend_daily", sa.BigInteger)):
        with op.batch_alter_table(table_name) as table:
            table.add_column(
                sa.Column("context_tokens_removed", tokens_type, nullable=False, server_default="0")
            )
            table.add_column(
                sa.Column("context_saving_nano", sa.BigInteger, nullable=False, server_default="0")
            )


def downgrade() -> None:
    for table_name in ("spend_daily", "requests"):
        with op.batch_alter_table(table_name) as table:
            table.drop_column("context_saving_nano")
            table.drop_column("context_tokens_removed")
