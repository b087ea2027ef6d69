"""The scanwatch Prometheus exporter: serves the pipeline's last metrics snapshot, never the database."""
