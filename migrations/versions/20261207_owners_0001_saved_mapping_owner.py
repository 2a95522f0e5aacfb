"""saved_mappings: each mapping belongs to its owner (issue 55)

The primary key becomes (owner, source): two users may remember different mappings for the same
file name, and neither reads, replaces or forgets the other's. Mappings saved before belong to
owner 0, the account-less caller (development mode and the CLI saved them).

Revision ID: owners_0001
Revises: evalstage_0001
Create Date: 2026-12-07 01:40:00
"""
import sqlalchemy as sa
from alembic import op

revision = "owners_0001"
down_revision = "evalstage_0001"
branch_labels = None
depends_on = None


def _table(name: str, owned: bool) -> None:
    key = ["owner", "source"] if owned else ["source"]
    op.create_table(
        name,
        *([sa.Column("owner", sa.Integer(), nullable=False)] if owned else []),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("mapping", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.PrimaryKeyConstraint(*key),
    )


def upgrade() -> None:
    # a new table copied into (a primary key changes the same way on SQLite and PostgreSQL)
    _table("saved_mappings_owned", owned=True)
    op.execute("INSERT INTO saved_mappings_owned (owner, source, mapping, updated_at) "
               "SELECT 0, source, mapping, updated_at FROM saved_mappings")
    op.drop_table("saved_mappings")
    op.rename_table("saved_mappings_owned", "saved_mappings")


def downgrade() -> None:
    """Back to one mapping per name: the account-less ones are kept, users' own are lost."""
    _table("saved_mappings_shared", owned=False)
    op.execute("INSERT INTO saved_mappings_shared (source, mapping, updated_at) "
               "SELECT source, mapping, updated_at FROM saved_mappings WHERE owner = 0")
    op.drop_table("saved_mappings")
    op.rename_table("saved_mappings_shared", "saved_mappings")
