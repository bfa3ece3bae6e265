"""The tree as Prometheus rules: signal recipes compiled to PromQL, one alert per server-decidable cause."""
