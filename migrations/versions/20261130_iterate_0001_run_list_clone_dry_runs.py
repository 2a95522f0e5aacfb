"""runs list (tags, note, archive), clone parent, dry runs

Revision ID: iterate_0001
Revises: alerts_0001
Create Date: 2026-11-30 23:00:00

runs.parent_id: the run a clone was made from (SET NULL when that run is deleted).
runs.note / archived_at: editable from the runs list; archived runs are hidden by default.
runs.smoke_full_steps: set on a smoke test (a few steps of a spec): the max_steps of the full
run its "Launch the full run" button starts with the same spec.
run_tags: one row per (run, tag), indexed by tag so a tag filter is an index lookup.
dry_runs: a spec scored on a worker without training; the result JSON comes back over HTTP
with a single-use ticket (its hash is stored, like a run's claim ticket).
Indexes for the list's sorts and filters: name, verdict, created_at, archived_at.
"""
import sqlalchemy as sa
from alembic import op

revision = "iterate_0001"
down_revision = "perf_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("note", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("smoke_full_steps", sa.Integer(), nullable=True))
        batch_op.create_foreign_key("fk_runs_parent_id", "runs", ["parent_id"], ["id"],
                                    ondelete="SET NULL")
        batch_op.create_index("ix_runs_parent_id", ["parent_id"])
        batch_op.create_index("ix_runs_name", ["name"])
        batch_op.create_index("ix_runs_verdict", ["verdict"])
        batch_op.create_index("ix_runs_created_at", ["created_at"])
        batch_op.create_index("ix_runs_archived_at", ["archived_at"])
    op.create_table(
        "run_tags",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("tag", sa.String(40), primary_key=True),
    )
    op.create_index("ix_run_tags_tag", "run_tags", ["tag"])
    op.create_table(
        "dry_runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("ticket_hash", sa.String(64), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_by_id", sa.Integer(),
                  sa.ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.text("(CURRENT_TIMESTAMP)")),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("dry_runs")
    op.drop_index("ix_run_tags_tag", table_name="run_tags")
    op.drop_table("run_tags")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        for name in ("ix_runs_archived_at", "ix_runs_created_at", "ix_runs_verdict",
                     "ix_runs_name", "ix_runs_parent_id"):
            batch_op.drop_index(name)
        batch_op.drop_constraint("fk_runs_parent_id", type_="foreignkey")
        batch_op.drop_column("smoke_full_steps")
        batch_op.drop_column("archived_at")
        batch_op.drop_column("note")
        batch_op.drop_column("parent_id")
