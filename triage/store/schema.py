"""The store's tables at the newest revision, as SQLAlchemy Core (the migrations say how each got here)."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

# JSON is kept as text: the same bytes on SQLite and PostgreSQL, parsed by the experiment log, never by SQL.
experiments = sa.Table(
    "experiments", metadata,
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
    sa.Column("who", sa.Text),
    sa.Column("note", sa.Text, nullable=False, server_default=""),
    sa.Column("created_by", sa.Text),
    sqlite_autoincrement=True,
)
