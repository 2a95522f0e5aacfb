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


RUN_INDEXES = ("parent_id", "name", "verdict", "created_at", "archived_at")


def upgrade() -> None:
    # In place, never batch mode: on SQLite batch mode copies ``runs`` to a new table and drops
    # the old one, and ON DELETE CASCADE then empties every run's points, findings and rollouts.
    # SQLite's ADD COLUMN takes an inline REFERENCES when the default is NULL (raw SQL: Alembic
    # refuses a foreign key outside batch mode there).
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE runs ADD COLUMN parent_id INTEGER "
                   "REFERENCES runs (id) ON DELETE SET NULL")
    else:
        op.add_column("runs", sa.Column("parent_id", sa.Integer(), nullable=True))
        op.create_foreign_key("fk_runs_parent_id", "runs", "runs", ["parent_id"], ["id"],
                              ondelete="SET NULL")
    op.add_column("runs", sa.Column("note", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("runs", sa.Column("smoke_full_steps", sa.Integer(), nullable=True))
    for column in RUN_INDEXES:
        op.create_index(f"ix_runs_{column}", "runs", [column])
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
    for column in RUN_INDEXES:
        op.drop_index(f"ix_runs_{column}", table_name="runs")
    if op.get_bind().dialect.name == "sqlite":
        # Batch mode rebuilds ``runs``: with foreign keys enforced that would cascade-delete
        # every run's children (see upgrade), so enforcement is off for the copy (the pragma
        # works here because Alembic runs SQLite migrations outside a transaction).
        op.execute("PRAGMA foreign_keys=OFF")
        with op.batch_alter_table("runs") as batch_op:
            for column in ("smoke_full_steps", "archived_at", "note", "parent_id"):
                batch_op.drop_column(column)
        op.execute("PRAGMA foreign_keys=ON")
        return
    op.drop_constraint("fk_runs_parent_id", "runs", type_="foreignkey")
    for column in ("smoke_full_steps", "archived_at", "note", "parent_id"):
        op.drop_column("runs", column)
