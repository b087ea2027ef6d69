"""What an operator types is checked before anything runs: bounded, in one line, and no key ever printed.

Each case runs `scanwatch` as users do, in a child process with a memory ceiling and a time limit, so a
file or a setting that would make it read for ever or build gigabytes fails the test instead of the host.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipelines.core.settings import ConfigError, Settings
from tests.helpers import history
from tests.reliability.harness import ROOT, assert_one_line

KEY = "rst_" + "k" * 40
OTHER = "rst_" + "o" * 40
ENV = {"SCANWATCH_BASE_URL": "http://127.0.0.1:9/v1", "KEY_A": KEY, "KEY_B": OTHER}


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB: a bomb fails the test, not the host


def scanwatch(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], env={**base, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=_limits)


def sync_with_file(tmp_path: Path, text: str | bytes | None, path: Path | None = None, **env: str
                   ) -> subprocess.CompletedProcess:
    file = path or tmp_path / "workspaces.yml"
    if text is not None:
        file.write_bytes(text if isinstance(text, bytes) else text.encode())
    db = tmp_path / "history" / "h.duckdb"
    done = scanwatch(["sync"], {**ENV, **env, "SCANWATCH_WORKSPACES_FILE": str(file), "SCANWATCH_DB": str(db)})
    assert not db.parent.exists()  # nothing touched
    return done


def _entry(name: str = "acme", variable: str = "KEY_A", extra: str = "") -> str:
    return f"workspaces:\n  - name: {name}\n    api_key_env: {variable}\n{extra}"


def test_a_key_pasted_into_api_key_env_is_never_printed(tmp_path):
    done = sync_with_file(tmp_path, _entry(variable=KEY))
    assert done.returncode == 2
    line = assert_one_line(done.stderr, must_contain="field 'api_key_env'")
    assert KEY not in done.stderr + done.stdout and "k" * 12 not in line
    assert "holds a key itself" in line


def test_a_key_pasted_as_a_name_or_an_address_is_never_printed(tmp_path):
    for text in (_entry(name=KEY), _entry(extra=f"    base_url: {KEY}\n"),
                 _entry(extra=f"    base_url: https://h.example/v1?key={KEY}\n")):
        done = sync_with_file(tmp_path, text)
        assert done.returncode == 2
        assert_one_line(done.stderr)
        assert "k" * 12 not in done.stderr + done.stdout, done.stderr


ALIAS_BOMB = """a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
workspaces:
  - name: *i
    api_key_env: KEY_A
"""


def test_a_yaml_alias_bomb_is_one_line(tmp_path):
    done = sync_with_file(tmp_path, ALIAS_BOMB)
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain="aliases")


def test_a_small_alias_is_refused_too(tmp_path):
    with pytest.raises(ConfigError, match="line 1: YAML anchors and aliases are not accepted"):
        _load(tmp_path, "x: &k KEY_A\n" + _entry(variable="*k"))


@pytest.mark.parametrize(("field", "text"), [
    ("name", _entry(name='"acme\\n"')),
    ("api_key_env", _entry(variable='"KEY_A\\n"')),
])
def test_a_trailing_newline_is_not_a_valid_name(tmp_path, field, text):
    done = sync_with_file(tmp_path, text)
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain=f"field '{field}' must be")


def test_a_file_over_the_size_cap_is_refused_before_parsing(tmp_path):
    done = sync_with_file(tmp_path, _entry() + "# " + "x" * (2 << 20) + "\n")
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain="larger than 1 MiB")


def test_dev_zero_is_refused_at_once(tmp_path):
    done = sync_with_file(tmp_path, None, path=Path("/dev/zero"))
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain="/dev/zero is not a regular file")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "workspaces.yml"
    os.mkfifo(fifo)
    done = sync_with_file(tmp_path, None, path=fifo)
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain="is not a regular file")


def _load(tmp_path: Path, text: str, **env: str) -> tuple:
    path = tmp_path / "workspaces.yml"
    path.write_text(text)
    return Settings.load({**ENV, **env, "SCANWATCH_WORKSPACES_FILE": str(path)}).workspaces


@pytest.mark.parametrize("url", [
    "https://api.example/v1?x=/v1", "https://api.example/v1#/v1", "https://api.example/v1\r\nX-Evil: /v1",
    "https://api.example/v1\n", "https://api example/v1", "https://api.example/x\t/v1",
])
def test_a_base_url_with_a_query_fragment_or_whitespace_is_refused(tmp_path, url):
    with pytest.raises(ConfigError) as err:
        _ = Settings.load({**ENV, "SCANWATCH_API_KEY": KEY, "SCANWATCH_BASE_URL": url}).workspaces
    assert "SCANWATCH_BASE_URL" in str(err.value) and "\n" not in str(err.value) and "\r" not in str(err.value)
    quoted = url.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, _entry(extra=f'    base_url: "{quoted}"\n'))
    assert "field 'base_url'" in str(err.value) and "\n" not in str(err.value)


def test_sla_days_out_of_range_fails_before_any_request_in_one_line(tmp_path):
    db = tmp_path / "h.duckdb"
    done = scanwatch(["sync"], {"SCANWATCH_BASE_URL": "http://127.0.0.1:9/v1", "SCANWATCH_API_KEY": KEY,
                                "SCANWATCH_DB": str(db), "SCANWATCH_SLA_DAYS": "critical=2147483648"})
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain="SCANWATCH_SLA_DAYS")
    assert not db.exists()


def test_an_old_history_read_by_scanwatch_sql_is_one_line(tmp_path):
    from pipelines.storage import migrate

    db = tmp_path / "old.duckdb"
    with history(duckdb.connect(str(db))) as conn:
        migrate(conn, target=3)
    for query in ("open_issues_by_project", "SELECT count(*) FROM fix_times"):
        done = scanwatch(["sql", query, "--db", str(db)], {})
        assert done.returncode == 1
        line = assert_one_line(done.stderr, must_contain="schema 3")
        assert "Catalog Error" not in line and "scanwatch sync" in line
