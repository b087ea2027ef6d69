"""The PostgreSQL engine reads SQL text itself (DuckDB's parser does it for DuckDB): statements, `$name`
parameters and bare words are found outside literals, quoted names, comments and dollar-quoted bodies."""

from __future__ import annotations

import pytest

from pipelines.core.sqlfiles import read_sql, sql_dir
from pipelines.storage.destinations.impl.postgres.sqltext import UnterminatedError, split, to_pyformat, words


def test_statements_split_at_semicolons_of_sql_only():
    text = """-- a comment; with a semicolon
    SELECT ';' AS a, "x;y" FROM t WHERE v = $v;  /* block; comment */
    CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql;
    SELECT E'it\\'s; here', $$;$$;
    ;
    """
    found = split(text)
    assert [s.query.split()[0] for s in found] == ["--", "/*", "SELECT"]
    assert found[0].named_parameters == ("v",)
    assert "$body$ SELECT 1; $body$" in found[1].query
    assert found[2].query.endswith("$$;$$")


def test_parameters_are_named_once_each_in_order_of_use_and_only_outside_literals():
    (statement,) = split("SELECT $b, $a, $b, '$c', \"$d\", x$e -- $f\n")
    assert statement.named_parameters == ("b", "a")


def test_pyformat_translates_names_and_doubles_percent_signs_outside_literals():
    sql = "SELECT $a % 2, '%s $a', $$ $a % $$, $1 FROM t WHERE x LIKE '50%' AND y = $b"
    assert to_pyformat(sql) == ("SELECT %(a)s %% 2, '%s $a', $$ $a % $$, $1 FROM t WHERE x LIKE '50%' "
                                "AND y = %(b)s")
    assert to_pyformat("SELECT ? + ?, '?'", positional=True) == "SELECT %s + %s, '?'"


def test_words_skip_literals_and_comments():
    sql = "SELECT pg_read_file('/etc/passwd') -- lo_import\n, \"Dblink\"(1), 'set role x' FROM t"
    assert words(sql) == ["select", "pg_read_file", "dblink", "from", "t"]


@pytest.mark.parametrize("sql", ["SELECT 'open", 'SELECT "open', "SELECT $$ open", "/* open"])
def test_an_unterminated_literal_is_refused(sql):
    with pytest.raises(UnterminatedError):
        split(sql)


def _bare(query: str) -> str:
    """A statement without its comment lines, its whitespace folded and its final semicolon."""
    lines = [line.split("--", 1)[0] for line in query.splitlines()]  # no file has `--` inside a literal
    return " ".join(" ".join(lines).split()).rstrip(";").strip()


def test_every_sql_file_of_the_project_splits_as_duckdb_splits_it():
    """The two engines see the same statements and parameters in every file, whoever splits them."""
    import duckdb

    conn = duckdb.connect()
    checked = 0
    for path in sorted(sql_dir().rglob("*.sql")):
        text = read_sql(str(path.relative_to(sql_dir())))
        ours = [(_bare(s.query), s.named_parameters) for s in split(text)]
        try:
            theirs = [(_bare(s.query), s.named_parameters) for s in conn.extract_statements(text)]
        except duckdb.Error:  # a file only PostgreSQL parses (the compatibility layer)
            continue
        assert [q for q, _ in ours] == [q for q, _ in theirs], path
        assert [set(p) for _, p in ours] == [set(p) for _, p in theirs], path
        checked += 1
    assert checked > 60
