"""runs.eval_progress: an evaluation's progress and timing (evaluating is a stage, issue 34)

Revision ID: evalstage_0001
Revises: harden2_0001
Create Date: 2026-12-02 17:10:00

A 6.5-minute evaluation showed "training" with the step and the ETA frozen: it looked hung. The
child now says "evaluating n/m"; the run keeps {done, total, since} while it evaluates and the
last evaluation's length after it (``last_s``), so the ETA can count the evaluations still
ahead (``app.runs.progress``).
"""
import sqlalchemy as sa
from alembic import op

revision = "evalstage_0001"
down_revision = "harden2_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:  # plain ALTER TABLE (see harden2_0001: batch mode would drop ``runs``)
    op.add_column("runs", sa.Column("eval_progress", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "eval_progress")
