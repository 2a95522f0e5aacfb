"""runs.answers_finding_id, runs.answers_category: the finding a "Try this fix" run answers

Revision ID: answers_0001
Revises: sysclock_0001
Create Date: 2026-12-08 04:00:00

A fix's clone kept its parent's name and nothing said which finding it was meant to answer
(issue 56): the run now keeps the finding's id and category, and its page links back to it.
No foreign key: a finding goes with its run, and this run still says what it tried.
"""
import sqlalchemy as sa
from alembic import op

revision = "answers_0001"
down_revision = "sysclock_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("answers_finding_id", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("answers_category", sa.String(40), nullable=True))


def downgrade() -> None:
    # a plain DROP COLUMN (SQLite 3.35+): a batch copy of runs would cascade into its children
    op.drop_column("runs", "answers_category")
    op.drop_column("runs", "answers_finding_id")
