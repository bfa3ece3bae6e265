"""Alembic environment: runs on the connection the store hands over (its transaction and lock already held)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:  # the store always passes one; a bare `alembic` command line is not supported
    raise RuntimeError("run migrations through triage.store.database.upgrade()")
context.configure(connection=connection)
with context.begin_transaction():
    context.run_migrations()
