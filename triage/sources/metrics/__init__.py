"""Metric sources: /metrics exposition, scrapes, saved snapshots, Prometheus windows, profiles, the simulator."""
