"""The one API the UI, the CLI and bench/ call: open a source → window pair or run → signals → diagnosis → deltas.

windows.py  open a live source as a window pair (demo simulator, polled /metrics, snapshots, Prometheus)
live.py     one Live refresh: diagnosis, deltas against the baseline and the panels' series, read concurrently
fleet.py    one Fleet refresh: a grouped Prometheus read → every replica's diagnosis → table records
uploads.py  benchmark files: parse once per content hash, keep what loaded, report what did not
verdict.py  the verdict a page shows first (top cause, deciding numbers, first action for the engine)

No module here imports streamlit; the UI wraps these functions in ``st.cache_*`` and session state only.
"""
