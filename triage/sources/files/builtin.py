"""The benchmark formats this version ships: importing each tool's module registers its formats.

The order here is the order listings and 'supported: …' messages show them in; detection order is each format's
``rank``.
"""
# isort: skip_file

from __future__ import annotations

from triage.sources.files import vllm, sglang, guidellm, genai_perf, aiperf  # noqa: F401 - for their registrations
from triage.sources.files import llmperf, inference_perf, generic, console  # noqa: F401 - for their registrations
