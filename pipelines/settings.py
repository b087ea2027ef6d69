"""Where scanwatch finds the service, its credential and its files.

`scanwatch sync` and `scanwatch exporter` started with the same environment agree on every path
without further settings: the snapshot defaults to a file beside the database.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

DEFAULT_DB = "data/scanwatch.duckdb"
SNAPSHOT_NAME = "scanwatch-metrics.json"
EXPORTER_PORT = 9817


class ConfigError(RuntimeError):
    """A setting is missing or malformed; the message names the variable to fix."""


@dataclass(frozen=True)
class Paths:
    db: Path
    snapshot: Path


def paths(env: dict[str, str] | None = None) -> Paths:
    env = os.environ if env is None else env
    db = Path(env.get("SCANWATCH_DB") or DEFAULT_DB)
    snapshot = Path(env.get("SCANWATCH_SNAPSHOT") or db.with_name(SNAPSHOT_NAME))
    return Paths(db=db, snapshot=snapshot)


def service(env: dict[str, str] | None = None) -> tuple[str, str]:
    """Base URL and credential, checked for shape before any request is made."""
    env = os.environ if env is None else env
    base_url = (env.get("SCANWATCH_BASE_URL") or "").strip().rstrip("/")
    api_key = (env.get("SCANWATCH_API_KEY") or "").strip()
    if not base_url:
        raise ConfigError("SCANWATCH_BASE_URL is not set: set it to the API address ending in /v1")
    if _userinfo(base_url):
        # A password in the address would travel into logs, errors and run storage: refuse it, unseen.
        raise ConfigError(
            f"SCANWATCH_BASE_URL carries a user name or password ({mask_url(base_url)[:80]}): remove the part "
            "before @; scanwatch authenticates with SCANWATCH_API_KEY only"
        )
    if not base_url.startswith(("http://", "https://")) or not base_url.endswith("/v1"):
        raise ConfigError(
            "SCANWATCH_BASE_URL must be an http(s) address ending in /v1, "
            f"for example https://api.example.com/v1 (got {mask_url(base_url)[:80]!r})"
        )
    if not api_key:
        raise ConfigError("SCANWATCH_API_KEY is not set: create an API key (rst_...) under Settings, API keys")
    if not api_key.startswith(("rst_", "rat_")):
        raise ConfigError("SCANWATCH_API_KEY does not look like an API key (rst_...) or an OAuth token (rat_...)")
    return base_url, api_key


def _userinfo(url: str) -> bool:
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return "@" in url


def mask_url(url: str) -> str:
    """The address as it may be shown: any `user:password@` replaced by `***@`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.rsplit("@", 1)[-1] if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def dagster_home(env: dict[str, str] | None = None) -> Path | None:
    """`DAGSTER_HOME` when set, checked: Dagster itself would fail later with a stack trace."""
    env = os.environ if env is None else env
    value = env.get("DAGSTER_HOME")
    if not value:
        return None
    home = Path(value)
    if not home.is_absolute():
        raise ConfigError(f"DAGSTER_HOME must be an absolute path (got {value[:80]!r}): set it to the full path "
                          "of a folder, or unset it to run without Dagster's run storage")
    if not home.is_dir():
        raise ConfigError(f"DAGSTER_HOME={value[:80]} is not an existing folder: create it "
                          "(mkdir -p \"$DAGSTER_HOME\") or unset it to run without Dagster's run storage")
    return home


def writable_db(env: dict[str, str] | None = None) -> Path:
    """The history's path, checked before a sync holds any lock: the file, or the folder it will be made in,
    must be writable."""
    db = paths(env).db
    if db.exists():
        if db.is_dir() or not os.access(db, os.R_OK | os.W_OK):
            raise ConfigError(f"SCANWATCH_DB={db} is not a writable file: fix its permissions or point "
                              "SCANWATCH_DB elsewhere")
        folder = db.parent
    else:
        folder = db.parent if str(db.parent) else Path(".")
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"the folder of SCANWATCH_DB ({folder}) is not writable: DuckDB writes its file and "
                          "journal there; fix its permissions or point SCANWATCH_DB elsewhere")
    return db
