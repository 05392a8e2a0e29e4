"""The fleet as Prometheus sees it: gauges read from the database at each scrape."""
