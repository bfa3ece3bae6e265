"""Who recorded each row: the signed-in user, or "local" when sign-in is off (issue 29).

Rows recorded before this revision keep NULL: nobody can tell who saved them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("experiments", sa.Column("created_by", sa.Text))
