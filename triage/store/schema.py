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

# The Alertmanager receiver's incidents: one row per alert (fingerprint + startsAt) it handled (revision 0005;
# the columns are those of the receiver's hand-written SQLite store, whose rows 0005's upgrade copies over).
incidents = sa.Table(
    "incidents", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("fingerprint", sa.Text, nullable=False),
    sa.Column("starts_at", sa.Text, nullable=False),
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
    sa.UniqueConstraint("fingerprint", "starts_at", name="incidents_fingerprint_starts_at"),
    sa.Index("incidents_starts_at", "starts_at"),
    sqlite_autoincrement=True,
)
