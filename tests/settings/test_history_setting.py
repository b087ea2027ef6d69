"""SCANWATCH_DB: a path keeps the DuckDB history, a `postgresql://` URL a PostgreSQL one; the URL's password is
shown nowhere, and Dagster's resource configuration holds the variable's name, never the URL."""

from __future__ import annotations

import dagster as dg
import pytest

from pipelines.core.history_location import HistoryLocation
from pipelines.core.settings import ConfigError, Settings
from pipelines.defs.resources import HistoryResource, default_resources

SECRET = "s3cr%40t:pw"  # percent-encoded '@' inside, a ':' too
URL = f"postgresql://scanwatch:{SECRET}@db.internal:5433/history?sslmode=require&password=other"


def test_a_path_keeps_duckdb_and_the_default_is_the_file_beside_the_snapshot():
    default = Settings.load({})
    assert (default.history.engine, str(default.history.path)) == ("duckdb", "data/scanwatch.duckdb")
    assert str(default.paths.snapshot) == "data/scanwatch-metrics.json"
    given = Settings.load({"SCANWATCH_DB": "/srv/h.duckdb"})
    assert (given.history.engine, str(given.paths.db), str(given.paths.snapshot)) == (
        "duckdb", "/srv/h.duckdb", "/srv/scanwatch-metrics.json")


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "PostgreSQL"])
def test_a_postgresql_url_is_the_postgresql_history_and_shows_masked(scheme):
    settings = Settings.load({"SCANWATCH_DB": URL.replace("postgresql", scheme, 1)})
    history = settings.history
    assert history.engine == "postgres" and settings.paths.db is None
    assert str(settings.paths.snapshot) == "data/scanwatch-metrics.json"  # no disk beside a server
    shown = [history.masked, str(history), repr(history), repr(settings)]
    for text in shown:
        assert "s3cr" not in text and "other" not in text and "db.internal:5433/history" in text
    assert history.masked.startswith(f"{scheme.lower()}://scanwatch:***@db.internal:5433/history?sslmode=require&password=***")
    assert history.url.endswith("password=other")  # libpq gets it untouched


def test_scrub_removes_the_password_as_written_and_decoded():
    history = HistoryLocation.parse(URL)
    text = f"failed: {SECRET} / s3cr@t:pw / other"
    assert history.scrub(text) == "failed: *** / *** / ***"


def test_a_url_without_a_password_leaves_it_to_pgpassword_or_pgpass():
    history = HistoryLocation.parse("postgresql://scanwatch@db:5432/history")
    assert history.secrets == () and history.masked == "postgresql://scanwatch@db:5432/history"


@pytest.mark.parametrize(("value", "says"), [
    ("postgresql://user:pw@:5432/db", "names no host"),
    ("postgresql://user:pw@db:5432/", "names no database"),
    ("postgresql://user:pw@db:port/db", "not a valid URL"),
    ("mysql://user:pw@db/history", "neither a file path nor a postgresql:// URL"),
    ("postgres:/db", "neither a file path nor a postgresql:// URL"),
])
def test_a_bad_url_is_one_line_without_the_password(value, says):
    with pytest.raises(ConfigError, match=says) as caught:
        _ = Settings.load({"SCANWATCH_DB": value}).history
    assert "pw" not in str(caught.value).replace("postgresql", "")


def test_the_history_resource_names_the_variable_and_masks_its_repr():
    """What Dagster's run storage keeps of a PostgreSQL history is `{"env": "SCANWATCH_DB"}`, as for the key
    (the whole chain, run storage included, is searched after a real sync in tests/postgres/test_secrets.py)."""
    env = {"SCANWATCH_DB": URL, "SCANWATCH_BASE_URL": "http://h/v1", "SCANWATCH_API_KEY": "rst_" + "a" * 40}
    history = default_resources(Settings.load(env))["history"]
    assert isinstance(history, HistoryResource)
    assert isinstance(history.database, dg.EnvVar) and history.database.env_var_name == "SCANWATCH_DB"
    assert "s3cr" not in repr(history) and "other" not in repr(history)
    assert "s3cr" not in repr(HistoryResource(database=URL))
    duck = default_resources(Settings.load({**env, "SCANWATCH_DB": "/srv/h.duckdb"}))["history"]
    assert duck.database == "/srv/h.duckdb"  # a path is no secret: kept as it is


@pytest.mark.parametrize(("value", "shown", "secret"), [
    ("postgresql://u:Ab+9/xYz=@db:5432/h", "postgresql://u:***@db:5432/h", ["Ab+9", "xYz="]),
    ("postgresql://u:Tr0ub4dor@horse@db/h", "postgresql://u:***@db/h", ["Tr0ub4dor", "horse"]),
    ("postgresql://u:Tr0ub4dor%40horse@db/h", "postgresql://u:***@db/h", ["Tr0ub4dor", "horse"]),
    ("postgresql://u:pa?ss#word@db/h", "postgresql://u:***@db/h", ["pa?ss#word", "word"]),
    ("postgresql://u@db/h?sslmode=require&password=Ab%2B9%2FxYz%3D", "postgresql://u@db/h?sslmode=require&password=***",
     ["Ab+9", "xYz=", "Ab%2B9%2FxYz%3D"]),
    ("host=db user=u password='Ab+9 /xYz=' dbname=h", "host=db user=u password=*** dbname=h", ["Ab+9", "xYz="]),
    ("host=db password=Tr0ub4dor@horse dbname=h", "host=db password=*** dbname=h", ["Tr0ub4dor", "horse"]),
    ("postgresql://u@db:5432/h", "postgresql://u@db:5432/h", []),
])
def test_one_masker_whatever_the_password_holds_and_whether_the_url_parses(value, shown, secret):
    """The masked form, and what a driver's text loses: the password as each parser cuts it (libpq reads the
    host of `Tr0ub4dor@horse@db` as `horse@db` and says so when it cannot resolve it)."""
    location = HistoryLocation(value)
    assert location.masked == shown
    said = location.scrub(f"failed to resolve host 'horse@db': {' '.join(secret)}")
    assert not any(s in said for s in secret), said


@pytest.mark.parametrize(("value", "says"), [
    ("postgresql://u:Ab+9/xYz=@db:5432/h", "percent-encode the password"),
    ("postgresql://u:Tr0ub4dor@horse@db/h", "percent-encode the password"),
    ("postgresql://u:pa?ss@db/h", "percent-encode the password"),
    ("host=db user=u password=Tr0ub4dor@horse dbname=h", "keyword/value"),
])
def test_a_url_each_parser_reads_differently_is_refused_in_one_line(value, says):
    with pytest.raises(ConfigError, match=says) as caught:
        HistoryLocation.parse(value)
    assert not any(s in str(caught.value) for s in ("Ab+9", "xYz", "Tr0ub4dor", "horse", "pa?ss"))


@pytest.mark.parametrize("where", ["env", "--db"])
def test_nothing_a_command_writes_to_stderr_carries_the_password(where, monkeypatch, capsys):
    """The CLI's last filter: a driver's text that no scanwatch line masked (a log record with the URL, an
    exception quoting the host libpq cut from the password) loses the password and its pieces, and an error no
    command expected is one line, not a traceback."""
    from pipelines import cli

    url = "postgresql://u:Tr0ub4dor@horse@127.0.0.1:5432/h"
    monkeypatch.setitem(cli.SUBCOMMANDS, "sync", ("tests.settings.raising_command", "fails"))
    monkeypatch.delenv("SCANWATCH_DB", raising=False)
    argv = ["sync", "--db", url] if where == "--db" else ["sync"]
    if where == "env":
        monkeypatch.setenv("SCANWATCH_DB", url)
    capsys.readouterr()
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "horse" not in err and "Tr0ub4dor" not in err, err
    assert "connecting to postgresql://u:***@" in err and "failed to resolve host '***@127.0.0.1'" in err, err
    assert err.splitlines()[-1].startswith("scanwatch sync: RuntimeError: failed to resolve host"), err
