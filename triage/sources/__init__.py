"""Input sources: each turns one kind of input (benchmark files, metrics) into the canonical `triage.run` objects."""
