"""Retro: walk the tree one step at a time with the loaded data, then export the incident report."""

from components.boundary import error_boundary
from components.retro_view import retro_page
from components.shell import adopt_navigation

adopt_navigation()

with error_boundary("retro"):
    retro_page()
