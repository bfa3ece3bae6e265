"""Benchmark: drop a load-test result, see the branch it matches and the numbers that prove it."""

from components.bench_view import benchmark_page
from components.boundary import error_boundary
from components.navigation import adopt_navigation
from components.paste_view import paste_area
from components.slo_picker import hardware_sidebar, slo_sidebar

adopt_navigation()

with error_boundary("benchmark"):
    benchmark_page(slo_sidebar(), hardware_sidebar(), paste=paste_area)
