"""The Batch API: uploaded files, batches and their items (gateway/batches/schema.py).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "batch_files",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("team", sa.String(128), nullable=True),
        sa.Column("purpose", sa.String(32), nullable=False),
        sa.Column("filename", sa.String(512), nullable=False),
        sa.Column("bytes", sa.Integer, nullable=False),
        sa.Column("created_at", _WHEN, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "batches",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("team", sa.String(128), nullable=True),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("dialect", sa.String(16), nullable=False),
        sa.Column("endpoint", sa.String(64), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("provider", sa.String(128), nullable=False),
        sa.Column("upstream_model", sa.String(256), nullable=False),
        sa.Column("upstream_id", sa.String(128), nullable=True),
        sa.Column("input_file_id", sa.String(64), nullable=True),
        sa.Column("output_file_id", sa.String(64), nullable=True),
        sa.Column("error_file_id", sa.String(64), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("completion_window", sa.String(16), nullable=False),
        sa.Column("metadata", sa.Text, nullable=True),
        sa.Column("created_at", _WHEN, nullable=False),
        sa.Column("expires_at", _WHEN, nullable=False),
        *(
            sa.Column(name, _WHEN, nullable=True)
            for name in (
                "in_progress_at",
                "finalizing_at",
                "completed_at",
                "failed_at",
                "expired_at",
                "cancelling_at",
                "cancelled_at",
            )
        ),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("completed", sa.Integer, nullable=False, server_default="0"),
        sa.Column("failed", sa.Integer, nullable=False, server_default="0"),
        sa.Column("reserved_nano", sa.BigInteger, nullable=False),
        sa.Column("budgets", sa.Text, nullable=True),
        sa.Column("released", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("tags", sa.Text, nullable=True),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_until", _WHEN, nullable=True),
    )
    op.create_index("ix_batches_team_created", "batches", ["team", "created_at"])
    op.create_index("ix_batches_status", "batches", ["status"])
    op.create_table(
        "batch_items",
        sa.Column("batch_id", sa.String(64), primary_key=True),
        sa.Column("custom_id", sa.String(256), primary_key=True),
        sa.Column("line", sa.Integer, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("worst_nano", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("response", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("request_id", sa.String(36), nullable=True),
        sa.Column("cost_nano", sa.BigInteger, nullable=False, server_default="0"),
    )
    op.create_index("ix_batch_items_state", "batch_items", ["batch_id", "state", "line"])


def downgrade() -> None:
    op.drop_table("batch_items")
    op.drop_table("batches")
    op.drop_table("batch_files")
