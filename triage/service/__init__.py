"""The one API the UI, the CLI and bench/ call: open a source → window pair or run → signals → diagnosis → deltas.

windows.py  open a live source as a window pair (demo simulator, polled /metrics, snapshots, Prometheus)
live.py     one Live refresh: diagnosis, deltas against the baseline and the panels' series, read concurrently
fleet.py    one Fleet refresh: a grouped Prometheus read → every replica's diagnosis → table records
uploads.py  benchmark files: parse once per content hash, keep what loaded, report what did not
verdict.py  the verdict a page shows first (top cause, deciding numbers, first action for the engine)
benchmark.py  one benchmark run's diagnosis, the load tool's summary, the sweep and its knee
memory.py   the Memory page: presets, a pasted config.json, the per-GPU estimate, a live vLLM's measured capacity
experiments.py  compare a baseline with a candidate; keep and read comparisons in the experiment log
retro.py    the retro walk's steps and suggestions; the incident report that exports and restores it
model.py, knowledge.py, display.py, evidence_text.py, params.py  the UI's view of the domain types, the tree's
            knowledge, number and text formatting, and URL parameters (explicit re-exports)

Pages, components and app.py import triage only through this package (issue 25): the import-linter contract in
pyproject.toml and tests/test_layers.py check it.

No module here imports streamlit; the UI wraps these functions in ``st.cache_*`` and session state only.
"""
