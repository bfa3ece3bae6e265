"""The one compiled piece: the server-log line scanner (optional: without a C compiler, numpy reads the logs)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("triage.sources.logs._linescan", ["triage/sources/logs/_linescan.c"], optional=True,
                             extra_compile_args=["-O3"])])
