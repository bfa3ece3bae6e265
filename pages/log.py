"""Log: every recorded verification, filterable by technique and verdict, exportable as CSV."""

from components.boundary import error_boundary
from components.log_view import log_page
from components.shell import adopt_navigation

adopt_navigation()

with error_boundary("log"):
    log_page()
