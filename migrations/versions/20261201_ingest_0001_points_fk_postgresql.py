"""metric_points without its foreign key on PostgreSQL

Revision ID: ingest_0001
Revises: artifacts_0001
Create Date: 2026-12-01 23:45:00

PostgreSQL checks a foreign key with a trigger per inserted row: about 3 us of the ~8 us a point
cost to store (bench/ingest.py, issue 25), for a reference ingest already guarantees (it holds
the run's row lock while it writes, and only a running run takes points). ``delete_run`` removes
the points itself, so the cascade is not missed. SQLite keeps the key: its check is a cheap
lookup, and dropping it would mean rebuilding the biggest table.
"""
from alembic import op

revision = "ingest_0001"
down_revision = "artifacts_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE metric_points DROP CONSTRAINT IF EXISTS metric_points_run_id_fkey")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DELETE FROM metric_points p WHERE NOT EXISTS "
                   "(SELECT 1 FROM runs r WHERE r.id = p.run_id)")
        op.create_foreign_key("metric_points_run_id_fkey", "metric_points", "runs", ["run_id"],
                              ["id"], ondelete="CASCADE")
