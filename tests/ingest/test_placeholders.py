"""One syntax per kind of placeholder: `$name` is a parameter the engine binds, `{name}` a slot
`sqlfiles.fill` writes in before the statement runs; neither is ever taken for the other."""

from __future__ import annotations

import re

import pytest

from pipelines.core.sqlfiles import cookbook, fill, read_sql, sql_dir
from pipelines.storage import entities
from pipelines.storage.destinations.impl import DUCKDB
from pipelines.storage.upsert import statements

_SLOT = re.compile(r"\{([a-z_]+)\}")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def test_a_slot_is_filled_and_a_parameter_is_left_to_the_engine():
    assert fill("SELECT $a, {b} FROM {c}", {"b": "x", "c": "$d"}) == "SELECT $a, x FROM $d"
    with pytest.raises(KeyError, match="b"):
        fill("SELECT {b}", {})


def test_the_merge_files_hold_slots_and_no_parameter_and_fill_completely():
    for name in ("upsert", "unchanged"):
        text = "\n".join(line for line in read_sql(f"merge/{name}.sql").splitlines() if not line.startswith("--"))
        assert _SLOT.search(text) and not _PARAM.search(text), name
        for entity in [v for v in vars(entities).values() if isinstance(v, entities.Entity)]:
            sql = "\n".join(line for line in statements(name, entity, DUCKDB).splitlines() if not line.startswith("--"))
            assert not _SLOT.search(sql) and "$" not in sql, (name, entity.name)


def test_slots_appear_only_where_they_are_filled():
    """Every other file runs as written: a `{name}` in it would reach the engine unfilled."""
    filled = {"merge/upsert.sql", "merge/unchanged.sql",  # upsert.py
              "merge/merged_list_check.sql", "merge/merged_list_record.sql",  # merge.py, the rows' digest
              *(f"roles/{p.name}" for p in (sql_dir() / "roles").glob("*.sql"))}  # commands/roles.py
    for path in sorted(sql_dir().rglob("*.sql")):
        relative = str(path.relative_to(sql_dir()))
        text = re.sub(r"/\*\s*each severity:.*?\*/", "", read_sql(relative), flags=re.DOTALL)
        code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
        if relative not in filled:
            assert not _SLOT.search(code), relative
    for query in cookbook().values():
        assert "{severity}" not in query.sql, query.name
