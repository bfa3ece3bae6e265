"""Stale metric names in a user's Prometheus rules and Grafana dashboards (``lint-rules``, ``lint-dashboard``)."""
