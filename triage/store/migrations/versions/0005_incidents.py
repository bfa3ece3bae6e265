"""The Alertmanager receiver's incidents, in the same database as the experiment log (issue 29).

A receiver's older hand-written SQLite incident file is not upgraded by this revision alone: ``database.upgrade``
moves its table aside first and copies its rows (ids kept) into the table created here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("starts_at", sa.Text, nullable=False),  # ISO 8601 UTC: sorts as text on both databases
        sa.Column("alertname", sa.Text, nullable=False),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("replica", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("ends_at", sa.Text),
        sa.Column("cause", sa.Text),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("diagnosis", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("link", sa.Text, nullable=False),
        sa.Column("received_at", sa.Text, nullable=False),
        # an alert is stored once however many receivers or retries deliver it (INSERT … ON CONFLICT DO NOTHING)
        sa.UniqueConstraint("fingerprint", "starts_at", name="incidents_fingerprint_starts_at"),
        sqlite_autoincrement=True,
    )
    op.create_index("incidents_starts_at", "incidents", ["starts_at"])  # the Retro page's newest-first list
