"""Engine load signals: each engine's Prometheus /metrics, scraped about once a second."""
