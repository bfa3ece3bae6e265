"""Verify: a change against its baseline, metric by metric, with intervals and a verdict; saved to the log."""

from components.boundary import error_boundary
from components.shell import adopt_navigation
from components.slo_picker import slo_sidebar
from components.verify_view import verify_page

adopt_navigation()

with error_boundary("verify"):
    verify_page(slo_sidebar())
