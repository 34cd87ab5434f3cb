"""Responses kept for the Responses API (`store: true`): what `previous_response_id`, `GET` and
`DELETE /v1/responses/{id}` and `input_items` read, scoped to the team that created them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stored_responses",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("team", sa.String(128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("response", sa.Text, nullable=False),
        sa.Column("input_items", sa.Text, nullable=False),
        sa.Column("context", sa.Text, nullable=False),
    )
    op.create_index("ix_stored_responses_created_at", "stored_responses", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_stored_responses_created_at", table_name="stored_responses")
    op.drop_table("stored_responses")
