"""`SCANWATCH_WORKSPACES_FILE`: several workspaces in one deployment.

```yaml
workspaces:
  - name: acme
    api_key_env: SCANWATCH_KEY_ACME
  - name: globex
    base_url: https://api.example/v1
    api_key_env: SCANWATCH_KEY_GLOBEX
```

Keys never sit in the file, only the names of the variables that hold them. Every problem is one line
naming the file, the entry and the field, raised before anything is synced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.credentials import ConfigError, Workspace, check_api_key, check_base_url

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELDS = {"name", "base_url", "api_key_env"}


def _entries(path: Path) -> list[Any]:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"SCANWATCH_WORKSPACES_FILE names {path}, which does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("workspaces"), list) or not doc["workspaces"]:
        raise ConfigError(f"{path}: expected a top-level 'workspaces:' list with at least one entry")
    return doc["workspaces"]


def _name(path: Path, index: int, entry: Any, seen: set[str]) -> str:
    where = f"{path}: workspaces[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping with name and api_key_env")
    unknown = sorted(set(map(str, entry)) - _FIELDS)
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r} (fields: name, base_url, api_key_env); "
                          "keys never go in this file, only the name of the variable holding them")
    name = entry.get("name")
    if name is None or name == "":
        raise ConfigError(f"{where}: field 'name' is missing")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}: field 'name' must be a short label of lower-case letters, digits, '-' "
                          f"or '_' (at most 40), got {str(name)[:60]!r}")
    if name in seen:
        raise ConfigError(f"{path}: workspaces[{index}] ({name}): field 'name' repeats an earlier entry")
    seen.add(name)
    return name


def read_workspace_names(path: Path) -> list[str]:
    """The names alone (Dagster's partitions); the same checks as the whole file for those fields."""
    seen: set[str] = set()
    return [_name(path, i, entry, seen) for i, entry in enumerate(_entries(path))]


def read_workspaces_file(path: Path, env: Mapping[str, str]) -> tuple[Workspace, ...]:
    seen: set[str] = set()
    found: list[Workspace] = []
    for index, entry in enumerate(_entries(path)):
        name = _name(path, index, entry, seen)
        where = f"{path}: workspaces[{index}] ({name})"
        variable = entry.get("api_key_env")
        if not variable:
            raise ConfigError(f"{where}: field 'api_key_env' is missing: name the variable that holds the key")
        if not isinstance(variable, str) or not _VARIABLE.match(variable):
            raise ConfigError(f"{where}: field 'api_key_env' must be an environment variable's name")
        default_url = env.get("SCANWATCH_BASE_URL") or ""
        given_url = entry.get("base_url")
        if given_url is not None and not isinstance(given_url, str):
            raise ConfigError(f"{where}: field 'base_url' must be a text address ending in /v1")
        try:
            base_url = check_base_url(given_url or default_url,
                                      "its base_url" if given_url else "SCANWATCH_BASE_URL (its default)")
            api_key = check_api_key(env.get(variable) or "", variable)
        except ConfigError as exc:
            field_name = "base_url" if "base_url" in str(exc) or "BASE_URL" in str(exc) else "api_key_env"
            raise ConfigError(f"{where}: field '{field_name}': {exc}") from None
        found.append(Workspace(name=name, base_url=base_url, api_key=api_key, key_variable=variable, label=name))
    keys: dict[tuple[str, str], str] = {}
    for ws in found:
        other = keys.setdefault((ws.base_url, ws.api_key), ws.name)
        if other != ws.name:
            raise ConfigError(f"{path}: workspaces ({ws.name}): field 'api_key_env': {ws.key_variable} holds the "
                              f"same key as {other}'s variable; each workspace needs its own key")
    return tuple(found)
