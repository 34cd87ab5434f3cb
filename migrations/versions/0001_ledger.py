"""The ledger: one row per request (partitioned by day on PostgreSQL), daily spend rollups, and
opt-in request bodies.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

DIMENSIONS = ("team", "key_id", "model", "provider", "tier")
MEASURES = (
    "requests",
    "errors",
    "prompt_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "input_cost_nano",
    "output_cost_nano",
    "cost_nano",
    "baseline_cost_nano",
)
TAG_MEASURES = ("requests", "errors", "prompt_tokens", "completion_tokens", "cost_nano", "baseline_cost_nano")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "requests",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("client_request_id", sa.String(128), nullable=True),
        sa.Column("team", sa.String(128), nullable=True),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("user", sa.String(256), nullable=True),
        sa.Column("tags", sa.Text, nullable=True),
        sa.Column("endpoint", sa.String(64), nullable=False),
        sa.Column("requested_model", sa.String(256), nullable=False),
        sa.Column("model", sa.String(256), nullable=True),
        sa.Column("provider", sa.String(128), nullable=True),
        sa.Column("upstream_model", sa.String(256), nullable=True),
        sa.Column("tier", sa.String(64), nullable=True),
        sa.Column("route_reason", sa.String(256), nullable=True),
        sa.Column("stream", sa.Boolean, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("error_type", sa.String(64), nullable=True),
        sa.Column("error_message", sa.Text, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("deployments_tried", sa.Text, nullable=True),
        sa.Column("fallback_used", sa.Boolean, nullable=False),
        sa.Column("cache_status", sa.String(32), nullable=True),
        sa.Column("idempotency_key", sa.String(255), nullable=True),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("cached_tokens", sa.Integer, nullable=False),
        sa.Column("cache_write_tokens", sa.Integer, nullable=False),
        sa.Column("cache_write_1h_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("reasoning_tokens", sa.Integer, nullable=False),
        sa.Column("usage_estimated", sa.Boolean, nullable=False),
        sa.Column("raw_usage", sa.Text, nullable=True),
        sa.Column("input_cost_nano", sa.BigInteger, nullable=False),
        sa.Column("output_cost_nano", sa.BigInteger, nullable=False),
        sa.Column("cost_nano", sa.BigInteger, nullable=False),
        sa.Column("baseline_cost_nano", sa.BigInteger, nullable=True),
        sa.Column("price_unknown", sa.Boolean, nullable=False),
        sa.Column("price_source", sa.String(128), nullable=True),
        sa.Column("price_version", sa.String(128), nullable=True),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("ttft_ms", sa.Float, nullable=True),
        sa.Column("output_tokens_per_second", sa.Float, nullable=True),
        sa.Column("overhead_ms", sa.Float, nullable=True),
        sa.PrimaryKeyConstraint("id", "created_at"),
        postgresql_partition_by="RANGE (created_at)",
    )
    if postgres:
        # Rows whose day has no partition yet land here; the writer creates daily partitions ahead.
        op.execute("CREATE TABLE requests_default PARTITION OF requests DEFAULT")
    op.create_index("ix_requests_created_at", "requests", ["created_at"])
    op.create_index("ix_requests_team_created_at", "requests", ["team", "created_at"])
    op.create_index("ix_requests_key_created_at", "requests", ["key_id", "created_at"])
    op.create_index("ix_requests_model_created_at", "requests", ["model", "created_at"])

    op.create_table(
        "spend_daily",
        sa.Column("day", sa.Date, nullable=False),
        *(sa.Column(name, sa.String(256), nullable=False) for name in DIMENSIONS),
        *(sa.Column(name, sa.BigInteger, nullable=False) for name in MEASURES),
        sa.PrimaryKeyConstraint("day", *DIMENSIONS),
    )
    op.create_table(
        "spend_daily_tags",
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("tag", sa.String(256), nullable=False),
        sa.Column("team", sa.String(128), nullable=False),
        *(sa.Column(name, sa.BigInteger, nullable=False) for name in TAG_MEASURES),
        sa.PrimaryKeyConstraint("day", "tag", "team"),
    )
    op.create_table(
        "request_bodies",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("team", sa.String(128), nullable=True),
        sa.Column("request_body", sa.Text, nullable=False),
        sa.Column("response_body", sa.Text, nullable=True),
        sa.Column("truncated", sa.Boolean, nullable=False),
    )
    op.create_index("ix_request_bodies_created_at", "request_bodies", ["created_at"])


def downgrade() -> None:
    op.drop_table("request_bodies")
    op.drop_table("spend_daily_tags")
    op.drop_table("spend_daily")
    op.drop_table("requests")
