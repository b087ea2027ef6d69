"""Request validation shared by the routes: bodies, query parameters, ids and site addresses."""

from __future__ import annotations

import ipaddress
import json
import re
import uuid
from typing import Any
from urllib.parse import urlsplit

from .errors import ApiError, invalid

HOST_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa", ".intranet", ".corp")
EXCLUDED_SUFFIXES = (".gov", ".mil")
EXCLUDED_HOSTS = frozenset({"excluded.example.com", "scanning.example"})


def parse_body(raw: bytes, content_type: str | None, *, allow_empty: bool = False) -> dict[str, Any]:
    """400 `body_invalid` unless the body is a JSON object sent as JSON."""
    if not raw.strip():
        if allow_empty:
            return {}
        raise ApiError(400, "body_invalid")
    if content_type is not None and "json" not in content_type.lower():
        raise ApiError(400, "body_invalid")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "body_invalid") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "body_invalid")
    return body


def only_fields(body: dict[str, Any], allowed: tuple[str, ...]) -> None:
    """"No other field is allowed": the first unexpected one is named in `param`."""
    for key in body:
        if key not in allowed:
            raise invalid(key)


def string_field(body: dict[str, Any], name: str, lo: int, hi: int, *, required: bool) -> str | None:
    if name not in body or body[name] is None:
        if required:
            raise invalid(name)
        return None
    value = body[name]
    if not isinstance(value, str) or not lo <= len(value) <= hi:
        raise invalid(name)
    return value


def parse_limit(query: dict[str, str]) -> int:
    raw = query.get("limit")
    if raw is None:
        return 20
    if not re.fullmatch(r"[0-9]{1,4}", raw.strip()) or not 1 <= int(raw) <= 100:
        raise invalid("limit")
    return int(raw)


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return False
    return len(value) == 36


def normalize_site(url: str) -> str:
    """The hostname a site address stands for, or the contract's url_* / site_excluded errors."""
    text = url.strip()
    if not text or any(ch.isspace() for ch in text):
        raise ApiError(400, "url_invalid")
    if "://" not in text:
        text = "https://" + text
    try:
        parts = urlsplit(text)
        host = (parts.hostname or "").rstrip(".").lower()
        _ = parts.port
    except ValueError as exc:
        raise ApiError(400, "url_invalid") from exc
    if parts.scheme not in ("http", "https") or not host:
        raise ApiError(400, "url_invalid")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None:
        if ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_unspecified:
            raise ApiError(400, "url_private")
        return host
    if host == "localhost" or host.endswith(PRIVATE_SUFFIXES):
        raise ApiError(400, "url_private")
    labels = host.split(".")
    if len(labels) < 2 or not all(HOST_LABEL.match(label) for label in labels) or labels[-1].isdigit():
        raise ApiError(400, "url_invalid")
    if is_excluded(host):
        raise ApiError(409, "site_excluded")
    return host


def is_excluded(host: str) -> bool:
    """Sites the service refuses to scan; also checked when a scan starts (the list can grow later)."""
    return host in EXCLUDED_HOSTS or host.endswith(EXCLUDED_SUFFIXES)
