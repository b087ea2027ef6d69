"""A workspace's address and key: checked before any request, masked wherever they are shown.

The one masker of scanwatch lives here, beneath both the settings (which read the two variables) and the
workspaces file (which names the variables holding each key), so neither has to import the other's reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

KEY_PREFIXES = ("rst_", "rat_")
# The one workspace of a deployment configured by SCANWATCH_BASE_URL + SCANWATCH_API_KEY: its name in the CLI,
# in Dagster's partitions and in the history (SQL gets it as $default_workspace); no workspaces-file entry
# may take it. Its metrics keep the service's own workspace name. Here, beneath the settings and the
# workspaces file, which both name it (`settings.DEFAULT_WORKSPACE` reads it from here).
DEFAULT_WORKSPACE = "default"
_KEY_LIKE = re.compile(r"(rst_|rat_)\S*")


class ConfigError(RuntimeError):
    """A setting is missing or malformed; the message names the variable (or file entry) to fix."""


def mask_key(api_key: str) -> str:
    """What may be shown of a credential: its kind, never its secret part. The one masker of scanwatch."""
    prefix = api_key[:4] if api_key[:4] in KEY_PREFIXES else ""
    return f"{prefix}…"


def shown(value: object, limit: int = 60) -> str:
    """A setting's value as a message may quote it: anything that looks like a key masked (a key pasted into
    the wrong field must not be printed back), cut to `limit` characters before it is ever built whole."""
    text = value[: limit + 1] if isinstance(value, str) else f"a {type(value).__name__}"
    text = _KEY_LIKE.sub(lambda m: m.group(1) + "…", text)
    return repr(text if len(text) <= limit else text[:limit] + "…")


def looks_like_key(value: str) -> bool:
    return value.strip().startswith(KEY_PREFIXES)


@dataclass(frozen=True)
class Workspace:
    """One followed workspace: where its API answers and which variable holds its key.

    `label` is the name shown on metrics; None for the one workspace of the two variables, whose metrics
    keep the service's own workspace name.
    """

    name: str
    base_url: str
    api_key: str = field(repr=False)
    key_variable: str = "SCANWATCH_API_KEY"
    label: str | None = None
    url_setting: str = "SCANWATCH_BASE_URL"  # where `base_url` came from, as a line tells the user to fix it
    scan_targets: tuple[str, ...] = ()  # what the opt-in scheduled scans start in this workspace

    def __repr__(self) -> str:
        return (f"Workspace(name={self.name!r}, base_url={self.base_url!r}, "
                f"api_key={mask_key(self.api_key)!r}, key_variable={self.key_variable!r})")


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


def check_base_url(base_url: str, variable: str) -> str:
    """The API address, refused unless it is exactly `http(s)://host[:port]/path/v1`: no user name or password
    (it would travel into logs and run storage), no query or fragment, no whitespace or control character
    (a CR/LF would end up in a request line, a space in a host)."""
    base_url = base_url.rstrip("/")
    if not base_url.strip():
        raise ConfigError(f"{variable} is not set: set it to the API address ending in /v1")
    if _userinfo(base_url):
        # A password in the address would travel into logs, errors and run storage: refuse it, unseen.
        raise ConfigError(
            f"{variable} carries a user name or password ({shown(mask_url(base_url), 80)}): remove the part "
            "before @; scanwatch authenticates with the API key only"
        )
    if any(c.isspace() or not c.isprintable() for c in base_url) or "?" in base_url or "#" in base_url:
        raise ConfigError(
            f"{variable} holds a space, a line break, a control character, '?' or '#' "
            f"(got {shown(base_url, 80)}): give the API address alone, ending in /v1"
        )
    if not base_url.startswith(("http://", "https://")) or not base_url.endswith("/v1"):
        raise ConfigError(
            f"{variable} must be an http(s) address ending in /v1, "
            f"for example https://api.example.com/v1 (got {shown(mask_url(base_url), 80)})"
        )
    return base_url


def check_api_key(api_key: str, variable: str) -> str:
    api_key = api_key.strip()
    if not api_key:
        raise ConfigError(f"{variable} is not set: create an API key (rst_...) under Settings, API keys")
    if not api_key.startswith(KEY_PREFIXES):
        raise ConfigError(f"{variable} does not look like an API key (rst_...) or an OAuth token (rat_...)")
    if not (api_key.isascii() and api_key.isprintable()) or any(c.isspace() for c in api_key):
        # httpx would fail deep in header encoding with a message that names nothing to fix.
        raise ConfigError(
            f"{variable} holds characters no API key has (spaces, line breaks or non-ASCII): "
            "copy the key (rst_...) again from Settings, API keys"
        )
    return api_key
