from tests.exporter.conftest import history_conn, snapshot, snapshot_with_arrival  # noqa: F401  (shared known-history fixtures)
