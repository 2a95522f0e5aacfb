"""alerts, mutes, delivery outbox and attempts, deployment-wide alert destinations

Revision ID: alerts_0001
Revises: verdict_0001
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "alerts_0001"
down_revision = "verdict_0001"
branch_labels = None
depends_on = None

NOW = sa.text("(CURRENT_TIMESTAMP)")


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("finding_id", sa.Integer(), sa.ForeignKey("findings.id", ondelete="SET NULL"),
                  nullable=True),
        sa.Column("category", sa.String(40), nullable=False),
        sa.Column("metric_key", sa.String(200), nullable=False),
        sa.Column("severity", sa.String(10), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(10), nullable=False, index=True),
        sa.Column("first_step", sa.Integer(), nullable=False),
        sa.Column("last_step", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("action", sa.Text(), nullable=True),
        sa.Column("opened_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_reason", sa.Text(), nullable=True),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("acknowledged_by", sa.String(200), nullable=True),
    )
    op.create_index("ix_alerts_condition", "alerts", ["run_id", "category", "metric_key"])
    op.create_table(
        "alert_mutes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("category", sa.String(40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=True),
        sa.UniqueConstraint("run_id", "category"),
    )
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=True, index=True),
        sa.Column("destination", sa.Text(), nullable=False),
        sa.Column("destination_key", sa.String(64), nullable=False, index=True),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("alert_ids", sa.JSON(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(10), nullable=False, index=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), server_default=NOW,
                  nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claim_token", sa.String(64), nullable=True, index=True),
        sa.Column("claimed_by", sa.String(120), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("digest_id", sa.String(64), nullable=True),
    )
    op.create_table(
        "alert_delivery_attempts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("delivery_id", sa.Integer(),
                  sa.ForeignKey("alert_deliveries.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("sender", sa.String(120), nullable=True),
    )
    op.create_table(
        "alert_config",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("urls", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("alert_config")
    op.drop_table("alert_delivery_attempts")
    op.drop_table("alert_deliveries")
    op.drop_table("alert_mutes")
    op.drop_index("ix_alerts_condition", table_name="alerts")
    op.drop_table("alerts")
