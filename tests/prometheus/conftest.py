from tests.exporter.conftest import history_conn, snapshot  # noqa: F401  (shared known-history fixtures)
