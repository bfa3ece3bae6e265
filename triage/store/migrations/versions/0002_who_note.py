"""Who made the change and a free note (the SQLite log's schema version 2)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("experiments", sa.Column("who", sa.Text))
    op.add_column("experiments", sa.Column("note", sa.Text, nullable=False, server_default=""))
