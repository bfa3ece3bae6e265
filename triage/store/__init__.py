"""The shared store: one SQLAlchemy engine per database URL (embedded SQLite file or PostgreSQL) and its migrations.

Tables live in ``schema.py`` and change only through Alembic revisions in ``migrations/versions`` (one linear
chain for every table, so a later table such as incidents is one more revision on the same chain).
"""
