"""Benchmark files of LLM load-test tools → canonical `Benchmark`: detect the format, parse it, check it.

Each format is one ``BenchmarkFormat`` in ``registry``; the shipped ones register from their tool's module.
"""

from __future__ import annotations

from triage.sources.files.load import detect_format, formats, load_benchmark

__all__ = ["detect_format", "formats", "load_benchmark"]
