"""Log: every recorded verification, filterable by technique and verdict, exportable as CSV."""

from components.log_view import log_page
from components.navigation import adopt_navigation

adopt_navigation()

log_page()
