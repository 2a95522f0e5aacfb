"""artifact_reservations: bytes an artifact upload in progress holds against the quotas

Revision ID: quota_0001
Revises: owners_0001
Create Date: 2026-12-07 01:30:00

Eight uploads at once each read the same free room and together stored 163 % of their run's
quota (issue 55): an upload now reserves its bytes under the run's lock before its body streams
in (``app.artifacts.quotas``).
"""
import sqlalchemy as sa
from alembic import op

revision = "quota_0001"
down_revision = "owners_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifact_reservations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_artifact_reservations_run_id", "artifact_reservations", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_artifact_reservations_run_id", table_name="artifact_reservations")
    op.drop_table("artifact_reservations")
