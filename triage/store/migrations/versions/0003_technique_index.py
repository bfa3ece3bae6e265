"""The filter's index on technique and verdict (the SQLite log's schema version 3)."""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("experiments_technique_overall", "experiments", ["technique", "overall"])
