"""The past the service already holds, rebuilt: in DuckDB (`reconstruct`), and sent to the store that scrapes
the exporter as blocks (`tsdb`), by remote write or to VictoriaMetrics (`remote`).

A new install would otherwise show flat lines for weeks, while the service keeps a year of scans with their
scores and every issue's first_seen_at and fixed_at. Everything rebuilt is marked as such: own tables in
DuckDB, days before the first observation only, and never an issue event (events page people).
"""
