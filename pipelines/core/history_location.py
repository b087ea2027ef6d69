"""Where the history lives: `SCANWATCH_DB` is a DuckDB file's path or a PostgreSQL URL.

A path keeps the single-machine default (a DuckDB file). `postgresql://user@host:5432/db` (or `postgres://`)
keeps the history in a PostgreSQL database, for several writers and readers on other machines. The password
comes from the URL, `PGPASSWORD` or a `.pgpass` file, as libpq reads them: scanwatch passes the URL to libpq
untouched and never reads the other two itself.

The URL is a secret when it carries a password, so it is shown only masked: `masked` for every line, repr
and error, and `scrub()` for text a driver wrote, in case it echoes what it was given.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pipelines.core.credentials import ConfigError

SCHEMES = ("postgresql", "postgres")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
# A secret given as a parameter: `password=...` in a URL's query or in keyword/value conninfo, quoted or not.
_PARAM = re.compile(r"(?i)(?<![a-z_])(ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&#]*)")
# What ends a URL's parts: a password holding one of them unencoded is read differently by each parser.
_DELIMITERS = re.compile(r"[@/:?#&\s]+")
# Pieces of a password shorter than this are not hunted on their own (they would mask "db" or a port);
# the whole password, and every longer piece of it, always are.
MIN_PIECE = 4


def _userinfos(rest: str) -> list[str]:
    """The user and password part of a URL (the text after `://`) as each reader of URLs finds it.

    Python's urlsplit takes the netloc up to the first `/`, `?` or `#` and the userinfo up to its last `@`;
    libpq takes the userinfo up to the first `@`, unless a `/` comes first; a password with an unencoded `/`
    or `?` ends only at the last `@` before the query. When they disagree the URL is ambiguous, and each
    reading's password is a secret (the host libpq then resolves may be part of it).
    """
    found = []
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    found.append(netloc.rsplit("@", 1)[0] if "@" in netloc else "")
    first = re.search(r"[@/]", rest)
    found.append(rest[:first.start()] if first and first.group() == "@" else "")
    query = rest.find("?")
    before = rest[:query] if query >= 0 and "@" in rest[:query] else rest
    found.append(before.rsplit("@", 1)[0] if "@" in before else "")
    return found


def _pieces(secret: str) -> list[str]:
    """A password, decoded and not, and its pieces as a misparse cuts them (`horse` of `Tr0ub4dor@horse`)."""
    out = [secret, unquote(secret)]
    for form in (secret, unquote(secret)):
        out += [p for p in _DELIMITERS.split(form) if len(p) >= MIN_PIECE]
    return out


def _text(value: str) -> str:
    """The characters of `value`, a str subclass included (Dagster's EnvVar refuses `str()`)."""
    return str.__str__(value) if isinstance(value, str) else str(value)


def _param_value(raw: str) -> str:
    if raw.startswith("'") and raw.endswith("'") and len(raw) >= 2:
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    return unquote(raw)


def secrets_of(value: str) -> tuple[str, ...]:
    """Every text of `value` (a URL, keyword/value conninfo or a path) that must never be shown, longest first:
    the password as each parser reads it, decoded and not, its pieces, and secret parameters."""
    text = _text(value).strip()
    found: list[str] = []
    if _URL.match(text):
        for userinfo in _userinfos(text.split("://", 1)[1]):
            if ":" in userinfo:
                found += _pieces(userinfo.split(":", 1)[1])
    for match in _PARAM.finditer(text):
        raw = match.group(2)
        found += _pieces(raw) + _pieces(_param_value(raw))
    unique = [s for s in dict.fromkeys(found) if s]
    return tuple(sorted(unique, key=len, reverse=True))


def mask(value: str) -> str:
    """`value` as it may be shown: a URL's password as `***` (wherever its last `@` puts the host), secret
    parameters as `***`, and any other text of the password taken out; text without a secret as it is."""
    text = _text(value)
    secrets = secrets_of(text)
    if _URL.match(text.strip()):
        scheme, rest = text.strip().split("://", 1)
        userinfo = _userinfos(rest)[2]
        if userinfo:
            user = userinfo.split(":", 1)[0]
            shown = f"{user}:***" if ":" in userinfo else user
            text = f"{scheme.lower()}://{shown}@{rest[len(userinfo) + 1:]}"
    text = _PARAM.sub(lambda m: f"{m.group(1) or ''}password=***", text)
    return scrub(text, secrets)


def scrub(text: str, secrets: tuple[str, ...] | list[str]) -> str:
    """`text` with each of `secrets` replaced by `***`, longest first."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret and secret != "***":
            text = text.replace(secret, "***")
    return text


@functools.lru_cache(maxsize=16)
def _secrets_cached(value: str) -> tuple[str, ...]:
    return secrets_of(value)


def scrub_all(text: str, also: tuple[str, ...] = ()) -> str:
    """`text` without any secret of `SCANWATCH_DB` (as the environment holds it now) or of the locations in
    `also` (a `--db` given): the last filter before a command's message leaves scanwatch."""
    secrets = [s for value in (os.environ.get("SCANWATCH_DB", ""), *also) for s in _secrets_cached(value)]
    return scrub(text, secrets)


_CONNINFO = re.compile(r"(?i)(^|\s)(host|hostaddr|port|dbname|user|password|service|sslmode)\s*=")


@dataclass(frozen=True)
class HistoryLocation:
    """One history: `engine` is `duckdb` (a file at `path`) or `postgres` (the database at `url`)."""

    value: str = field(repr=False)

    @classmethod
    def parse(cls, value: str | Path, variable: str = "SCANWATCH_DB") -> HistoryLocation:
        """The setting checked: a URL must name a host and a database, and read the same to every parser (a
        password with an unencoded `@`, `/` or `?` does not); libpq judges the rest when it connects."""
        text = str(value).strip()
        location = cls(text)
        if not location.is_postgres:
            if _URL.match(text) or text.lower().startswith(("postgres:", "postgresql:")):
                raise ConfigError(f"{variable} is neither a file path nor a postgresql:// URL "
                                  f"({location.masked[:80]!r}): use postgresql://user@host:5432/database")
            if _CONNINFO.search(text):
                raise ConfigError(f"{variable} looks like keyword/value connection settings "
                                  f"({location.masked[:80]!r}), not a file path: use "
                                  "postgresql://user@host:5432/database and the password in PGPASSWORD or ~/.pgpass")
            return location
        readings = set(_userinfos(text.split("://", 1)[1]))
        if len(readings) > 1:
            # Not even masked: where the password ends is what the parsers disagree on, so any piece shown
            # may be part of it.
            raise ConfigError(f"{variable}'s user and password read differently to each URL parser (the URL "
                              "is not shown: its password's end cannot be told): percent-encode the password "
                              "('@' as %40, '/' as %2F, "
                              "':' as %3A, '?' as %3F, '#' as %23), or leave it out and use PGPASSWORD or ~/.pgpass")
        try:
            parts = urlsplit(text)
            _ = parts.port  # a port that is not a number raises here
        except ValueError:
            # Not shown, masked or not: a password with URL characters can end anywhere in what does not parse.
            raise ConfigError(f"{variable} is not a valid URL (the URL is not shown: part of it may be the "
                              "password): check the host and port, and percent-encode the password ('@' as %40, "
                              "'/' as %2F, ':' as %3A, '?' as %3F, '#' as %23) or leave it out and use PGPASSWORD or "
                              "~/.pgpass") from None
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
    def file(self) -> Path | None:
        """The history's file, or None when the history is a server's (a URL)."""
        return None if self.is_postgres else Path(self.value)

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
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown: the URL's password (as written, decoded, and cut by any parser) and secret
        parameters."""
        return secrets_of(self.value)

    @property
    def masked(self) -> str:
        """The location as it may be shown: a path as it is, a URL with its password as `***`."""
        return mask(self.value)

    def scrub(self, text: str) -> str:
        """`text` with every secret of this location replaced by `***` (a driver's error, a log line)."""
        return scrub(text, self.secrets)

    def __str__(self) -> str:
        return self.masked

    def __repr__(self) -> str:
        return f"HistoryLocation({self.masked!r})"
