"""Where the history lives: `SCANWATCH_DB` is a DuckDB file's path or a PostgreSQL URL.

A path keeps the single-machine default (a DuckDB file). `postgresql://user@host:5432/db` (or `postgres://`)
keeps the history in a PostgreSQL database, for several writers and readers on other machines. The password
comes from the URL, `PGPASSWORD` or a `.pgpass` file, as libpq reads them: scanwatch passes the URL to libpq
untouched and never reads the other two itself.

The URL is a secret when it carries a password, so it is shown only masked: `masked` for every line, repr
and error, and `scrub()` for text a driver wrote, in case it echoes what it was given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from pipelines.credentials import ConfigError

SCHEMES = ("postgresql", "postgres")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_SECRET_PARAMS = {"password", "sslpassword"}


@dataclass(frozen=True)
class HistoryLocation:
    """One history: `engine` is `duckdb` (a file at `path`) or `postgres` (the database at `url`)."""

    value: str = field(repr=False)

    @classmethod
    def parse(cls, value: str | Path, variable: str = "SCANWATCH_DB") -> HistoryLocation:
        """The setting checked: a URL must name a host and a database; libpq judges the rest when it connects."""
        text = str(value).strip()
        location = cls(text)
        if not location.is_postgres:
            if _URL.match(text) or text.lower().startswith(("postgres:", "postgresql:")):
                raise ConfigError(f"{variable} is neither a file path nor a postgresql:// URL "
                                  f"({location.masked[:80]!r}): use postgresql://user@host:5432/database")
            return location
        try:
            parts = urlsplit(text)
            _ = parts.port  # a port that is not a number raises here
        except ValueError as exc:
            raise ConfigError(f"{variable} is not a valid URL ({location.masked[:80]}): {exc}") from None
        if not parts.hostname:
            raise ConfigError(f"{variable} names no host ({location.masked[:80]}): "
                              "use postgresql://user@host:5432/database")
        if not parts.path.strip("/"):
            raise ConfigError(f"{variable} names no database ({location.masked[:80]}): "
                              "use postgresql://user@host:5432/database")
        return location

    @property
    def is_postgres(self) -> bool:
        return self.value.split(":", 1)[0].lower() in SCHEMES and "://" in self.value

    @property
    def engine(self) -> str:
        return "postgres" if self.is_postgres else "duckdb"

    @property
    def path(self) -> Path:
        """The DuckDB file; a PostgreSQL history has none."""
        if self.is_postgres:
            raise ValueError("a PostgreSQL history has no file path")
        return Path(self.value)

    @property
    def url(self) -> str:
        """The PostgreSQL URL as given, password included: for libpq only, never to be shown."""
        if not self.is_postgres:
            raise ValueError("a DuckDB history has no URL")
        return self.value

    @property
    def _is_url(self) -> bool:
        return bool(_URL.match(self.value))

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown: the URL's password (as written and decoded) and secret parameters."""
        if not self._is_url:
            return ()
        found: list[str] = []
        try:
            parts = urlsplit(self.value)
            if parts.password:
                found += [parts.password, unquote(parts.password)]
            found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k in _SECRET_PARAMS]
        except ValueError:
            netloc = self.value.split("://", 1)[1].split("/", 1)[0]
            if "@" in netloc and ":" in netloc.rsplit("@", 1)[0]:
                found.append(netloc.rsplit("@", 1)[0].split(":", 1)[1])
        return tuple(s for s in dict.fromkeys(found) if s)

    @property
    def masked(self) -> str:
        """The location as it may be shown: a path as it is, a URL with its password as `***`."""
        if not self._is_url:
            return self.value
        try:
            parts = urlsplit(self.value)
            netloc = parts.netloc
            if "@" in netloc:
                userinfo, host = netloc.rsplit("@", 1)
                user = userinfo.split(":", 1)[0]
                netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
            query = urlencode([(k, "***" if k in _SECRET_PARAMS else v)
                               for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
            return urlunsplit(parts._replace(netloc=netloc, query=query))
        except ValueError:
            return self.scrub(self.value)

    def scrub(self, text: str) -> str:
        """`text` with every secret of this location replaced by `***` (a driver's error, a log line)."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def __str__(self) -> str:
        return self.masked

    def __repr__(self) -> str:
        return f"HistoryLocation({self.masked!r})"
