"""Live sources: engine metric maps, metric windows (scrapes, Prometheus), server-side signals."""
