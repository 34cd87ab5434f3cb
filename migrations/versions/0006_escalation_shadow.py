"""Escalation and shadow checks on each ledger row: the discarded first attempt of an escalated
`auto` request (tier/model, reason, cost) and, on a shadow check's own row, the request it shadowed
and whether the two answers agreed.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.add_column(sa.Column("escalated_from", sa.String(320), nullable=True))
        table.add_column(sa.Column("escalation_reason", sa.String(32), nullable=True))
        table.add_column(sa.Column("escalation_cost_nano", sa.BigInteger, nullable=False, server_default="0"))
        table.add_column(sa.Column("shadow_of", sa.String(36), nullable=True))
        table.add_column(sa.Column("shadow_agreement", sa.Boolean, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as table:
        table.drop_column("shadow_agreement")
        table.drop_column("shadow_of")
        table.drop_column("escalation_cost_nano")
        table.drop_column("escalation_reason")
        table.drop_column("escalated_from")
