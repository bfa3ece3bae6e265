"""The experiment log's first table (the SQLite log's schema version 1)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("technique", sa.Text),
        sa.Column("workload", sa.Text, nullable=False),
        sa.Column("baseline_name", sa.Text, nullable=False),
        sa.Column("baseline_sha256", sa.Text, nullable=False),
        sa.Column("candidate_name", sa.Text, nullable=False),
        sa.Column("candidate_sha256", sa.Text, nullable=False),
        sa.Column("metrics", sa.Text, nullable=False),
        sa.Column("overall", sa.Text, nullable=False),
        sqlite_autoincrement=True,  # ids are never reused after a delete, as in the hand-written SQLite schema
    )
