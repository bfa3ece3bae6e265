"""Memory: which of weights, KV cache, activations and overhead is the big one, and what each step frees."""

from components.boundary import error_boundary
from components.memory_view import memory_page
from components.shell import adopt_navigation

adopt_navigation()

with error_boundary("memory"):
    memory_page()
