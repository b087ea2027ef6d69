"""`SCANWATCH_WORKSPACES_FILE`: several workspaces in one deployment.

```yaml
workspaces:
  - name: acme
    api_key_env: SCANWATCH_KEY_ACME
  - name: globex
    base_url: https://api.example/v1
    api_key_env: SCANWATCH_KEY_GLOBEX
    label: Globex Corporation   # optional: what metrics, alerts and the history call it (default: its name)
```

Keys never sit in the file, only the names of the variables that hold them. Every problem is one line
naming the file, the entry and the field, raised before anything is synced. The file is read bounded (a
regular file of at most 1 MiB: never a FIFO that waits for a writer, nor `/dev/zero`), YAML anchors and
aliases are refused before anything is built from them (an alias bomb of a few lines expands to gigabytes),
and no value that looks like a key is ever quoted back.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pipelines.core.credentials import (
    DEFAULT_WORKSPACE,
    ConfigError,
    Workspace,
    check_api_key,
    check_base_url,
    looks_like_key,
    shown,
)

# One home for what a name is, always used with fullmatch (`$` would also match before a final newline): a
# followed workspace's name, and an identifier (an environment variable's name, which is also the rule of a
# Prometheus label name for `backfill-prometheus --label`).
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_FIELDS = {"name", "base_url", "api_key_env", "api_key_file", "scan_targets", "label"}
MAX_LABEL = 100
_TARGET_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a target id (a UUID by contract), never a key nor a path
MAX_FILE_BYTES = 1 << 20  # a thousand workspaces take about 100 KB
MAX_KEY_FILE_BYTES = 4096  # a key is tens of characters


def _read_bounded(path: Path) -> str:
    return _read_file(path, MAX_FILE_BYTES, "SCANWATCH_WORKSPACES_FILE names {path}, which does not exist",
                      "{path} is not a regular file: point SCANWATCH_WORKSPACES_FILE at the YAML file listing the "
                      "workspaces", "{path} is larger than 1 MiB: it is not a workspaces file")


def _read_file(path: Path, limit: int, missing: str, irregular: str, too_large: str) -> str:
    """A small text file read without blocking (a FIFO or `/dev/zero` is refused at once) and bounded."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError(missing.format(path=path)) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(irregular.format(path=path))
        data = b""
        while len(data) <= limit and (chunk := os.read(fd, limit + 1 - len(data))):
            data += chunk
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConfigError(too_large.format(path=path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: cannot be read (not UTF-8 text)") from None


def parse_yaml(path: Path | str, text: str, what: str = "the workspaces file", each: str = "entry") -> Any:
    """An operator's YAML file (the workspaces file, the ownership map), with anchors and aliases refused
    before anything is built from them (a few lines of aliases can expand to gigabytes) and a syntax error as
    one line naming its line."""
    import yaml

    try:
        # Anchors and aliases first, from the event stream (linear in the text): nothing is built from them.
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                line = "?" if event.start_mark is None else event.start_mark.line + 1
                raise ConfigError(f"{path}: line {line}: YAML anchors and aliases are not "
                                  f"accepted in {what}: write each {each} out")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None


def _entries(path: Path) -> list[Any]:
    return _parsed(str(path), _read_bounded(path))


@lru_cache(maxsize=8)
def _parsed(path: str, text: str) -> list[Any]:
    """The entries of one text of the file, parsed once: every step of every run asks for its workspace, and
    parsing a thousand entries costs tens of milliseconds. Keyed on the text itself (not its modification
    time, which two quick writes of one size can share), so an edited file is parsed again at once. The
    entries are shared between callers: read them, never change them."""
    doc = parse_yaml(Path(path), text)
    entries = doc.get("workspaces") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: expected a top-level 'workspaces:' list with at least one entry")
    return entries


def _name(path: Path, index: int, entry: Any, seen: set[str]) -> str:
    where = f"{path}: workspaces[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping with name and api_key_env")
    unknown = sorted(set(map(str, entry)) - _FIELDS)
    if unknown:
        raise ConfigError(f"{where}: unknown field {shown(unknown[0], 40)} (fields: name, base_url, api_key_env, "
                          "api_key_file, scan_targets, label); "
                          "keys never go in this file, only the name of the variable holding them")
    name = entry.get("name")
    if name is None or name == "":
        raise ConfigError(f"{where}: field 'name' is missing")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigError(f"{where}: field 'name' must be a short label of lower-case letters, digits, '-' "
                          f"or '_' (at most 40), got {shown(name)}")
    if name in seen:
        raise ConfigError(f"{path}: workspaces[{index}] ({name}): field 'name' repeats an earlier entry")
    seen.add(name)
    return name


def _scan_targets(where: str, entry: dict[str, Any]) -> tuple[str, ...]:
    targets = entry.get("scan_targets") or []
    if not isinstance(targets, list) or not all(isinstance(t, str) and _TARGET_ID.fullmatch(t)
                                                and not looks_like_key(t) for t in targets):
        raise ConfigError(f"{where}: field 'scan_targets' must be a list of target ids of this workspace")
    return tuple(targets)


def _label(where: str, entry: dict[str, Any], name: str) -> str:
    """What the workspace is called on every metric, alert and history row, and the name the history binds to
    its workspace. A workspace followed until now by the two variables is shown under the service's own name
    (`Acme Corp`): giving that name here keeps its series when it moves into this file."""
    label = entry.get("label", name)
    if (not isinstance(label, str) or not label or label != label.strip() or len(label) > MAX_LABEL
            or not label.isprintable() or looks_like_key(label) or label == DEFAULT_WORKSPACE):
        raise ConfigError(f"{where}: field 'label' must be the name to show on metrics and alerts: printable "
                          f"text of at most {MAX_LABEL} characters, no leading or trailing space, not "
                          f"{DEFAULT_WORKSPACE!r} (got {shown(label)})")
    return label


def read_scan_targets(path: Path) -> dict[str, tuple[str, ...]]:
    """Each workspace's scheduled-scan targets, without needing the keys (the schedule reads them)."""
    seen: set[str] = set()
    found = {}
    for index, entry in enumerate(_entries(path)):
        name = _name(path, index, entry, seen)
        found[name] = _scan_targets(f"{path}: workspaces[{index}] ({name})", entry)
    return found


def read_workspace_names(path: Path) -> list[str]:
    """The names alone (Dagster's partitions); the same checks as the whole file for those fields."""
    return list(_names(str(path), _read_bounded(path)))


@lru_cache(maxsize=8)
def _names(path: str, text: str) -> tuple[str, ...]:
    seen: set[str] = set()
    return tuple(_name(Path(path), i, entry, seen) for i, entry in enumerate(_parsed(path, text)))


def _key_file(where: str, path: Path) -> str:
    """A key kept in a file (a mounted Secret's), read bounded and never quoted back."""
    return _read_file(path, MAX_KEY_FILE_BYTES,
                      f"{where}: its key file {{path}} does not exist: create it, or name the key's variable "
                      "in api_key_env", f"{where}: its key file {{path}} is not a regular file",
                      f"{where}: its key file {{path}} is larger than 4 KiB: it does not hold one key")


def _key(path: Path, where: str, name: str, entry: dict[str, Any], env: Mapping[str, str]) -> tuple[str, str, str]:
    """Where this entry's key is and the key itself: (the field a line names, the setting it names, the key)."""
    variable, key_file = entry.get("api_key_env"), entry.get("api_key_file")
    if variable and key_file:
        raise ConfigError(f"{where}: fields 'api_key_env' and 'api_key_file' both given: name one place for its key")
    if key_file:
        if not isinstance(key_file, str) or looks_like_key(key_file) or not key_file.strip() \
                or any(not c.isprintable() for c in key_file):
            raise ConfigError(f"{where}: field 'api_key_file' must be the path of a file holding the key "
                              "(keys never go in this file)")
        file = Path(key_file) if Path(key_file).is_absolute() else path.parent / key_file
        return "api_key_file", f"the key file {file}", _key_file(where, file)
    if not variable:
        folder = (env.get("SCANWATCH_KEYS_DIR") or "").strip()
        if folder:
            file = Path(folder) / name
            return "api_key_file", f"the key file {file}", _key_file(where, file)
        raise ConfigError(f"{where}: field 'api_key_env' is missing: name the variable that holds the key (or "
                          "the file, api_key_file, or set SCANWATCH_KEYS_DIR to a folder of one key file per "
                          "workspace)")
    if isinstance(variable, str) and looks_like_key(variable):
        raise ConfigError(f"{where}: field 'api_key_env' holds a key itself: put the key in an environment "
                          "variable and name that variable here (keys never go in this file)")
    if not isinstance(variable, str) or not IDENTIFIER.fullmatch(variable):
        raise ConfigError(f"{where}: field 'api_key_env' must be an environment variable's name")
    return "api_key_env", variable, env.get(variable) or ""


def _workspace(path: Path, index: int, name: str, entry: dict[str, Any], env: Mapping[str, str]) -> Workspace:
    where = f"{path}: workspaces[{index}] ({name})"
    key_field, key_setting, raw_key = _key(path, where, name, entry, env)
    default_url = env.get("SCANWATCH_BASE_URL") or ""
    given_url = entry.get("base_url")
    if given_url is not None and not isinstance(given_url, str):
        raise ConfigError(f"{where}: field 'base_url' must be a text address ending in /v1")
    try:
        base_url = check_base_url(given_url or default_url,
                                  "its base_url" if given_url else "SCANWATCH_BASE_URL (its default)")
        api_key = check_api_key(raw_key, key_setting)
    except ConfigError as exc:
        field_name = "base_url" if "base_url" in str(exc) or "BASE_URL" in str(exc) else key_field
        raise ConfigError(f"{where}: field '{field_name}': {exc}") from None
    url_setting = f"the base_url of workspace {name} in {path}" if given_url else "SCANWATCH_BASE_URL"
    return Workspace(name=name, base_url=base_url, api_key=api_key, key_variable=key_setting,
                     label=_label(where, entry, name),
                     url_setting=url_setting, scan_targets=_scan_targets(where, entry))


def read_workspace(path: Path, name: str, env: Mapping[str, str]) -> Workspace | None:
    """One workspace of the file, its entry alone checked (None when the file does not list it): what a run
    of that workspace needs, at the cost of one entry, whatever the file holds. A thousand entries checked
    at every step of every run cost more than the run; `read_workspaces_file` checks them all together."""
    text = _read_bounded(path)
    names = _names(str(path), text)
    if name not in names:
        return None
    index = names.index(name)
    return _workspace(path, index, name, _parsed(str(path), text)[index], env)


def read_workspaces_file(path: Path, env: Mapping[str, str]) -> tuple[Workspace, ...]:
    text = _read_bounded(path)
    found = [_workspace(path, index, name, entry, env)
             for index, (name, entry) in enumerate(zip(_names(str(path), text), _parsed(str(path), text),
                                                       strict=True))]
    labels: dict[str, str] = {}
    for ws in found:
        other = labels.setdefault(ws.label or ws.name, ws.name)
        if other != ws.name:
            raise ConfigError(f"{path}: workspaces ({ws.name}): field 'label': {shown(ws.label)} is already "
                              f"{other}'s label; each workspace needs a label of its own")
    keys: dict[tuple[str, str], str] = {}
    for ws in found:
        other = keys.setdefault((ws.base_url, ws.api_key), ws.name)
        if other != ws.name:
            raise ConfigError(f"{path}: workspaces ({ws.name}): field 'api_key_env': {ws.key_variable} holds the "
                              f"same key as {other}'s variable; each workspace needs its own key")
    return tuple(found)
