"""Reading SQL text the way PostgreSQL does, for what DuckDB's parser does for itself.

scanwatch's files name their parameters `$name` and a file may hold several statements. DuckDB splits and
binds them itself (`extract_statements`); for PostgreSQL, whose driver knows neither, this lexer finds the
statements, the parameters each names and the words it is made of, skipping string literals, quoted
identifiers, comments and dollar-quoted bodies, so a `;` or a `$` inside one of them is never taken for
SQL.

It reads scanwatch's own files, and shapes friendly messages about a user's text: it is no boundary. The
read door's safety comes from the server (one statement through the extended protocol, a READ ONLY
transaction, the role; `pipelines/storage/postgres_read.py`), so a text this lexer misreads (a non-ASCII
identifier that ends in `$a$` reads here as the start of a dollar-quoted body) can only get a less helpful
line, never past the door.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

_IDENT_START = re.compile(r"[A-Za-z_\u0080-\uffff]")
_IDENT = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]*")
_TAG = re.compile(r"\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_WORD = re.compile(r"[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*")


class UnterminatedError(ValueError):
    """A string, quoted name, comment or dollar-quoted body that never ends."""


@dataclass(frozen=True)
class Token:
    kind: str  # code, string, ident (a quoted name), comment, dollar (a dollar-quoted body), param, semicolon
    text: str


def tokens(sql: str) -> Iterator[Token]:
    """The text in pieces; `code` pieces hold everything outside literals, names and comments."""
    i, n, start = 0, len(sql), 0

    def code(upto: int) -> Iterator[Token]:
        if upto > start:
            yield Token("code", sql[start:upto])

    while i < n:
        c = sql[i]
        nxt = sql[i + 1] if i + 1 < n else ""
        if c == "-" and nxt == "-":
            yield from code(i)
            end = sql.find("\n", i)
            end = n if end < 0 else end
            yield Token("comment", sql[i:end])
            i = start = end
        elif c == "/" and nxt == "*":
            yield from code(i)
            depth, j = 1, i + 2
            while depth and j < n:
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                raise UnterminatedError("a /* comment never ends")
            yield Token("comment", sql[i:j])
            i = start = j
        elif c in "'\"":
            yield from code(i)
            escapes = c == "'" and i > 0 and sql[i - 1] in "eE" and (i < 2 or not sql[i - 2].isalnum())
            j = i + 1
            while True:
                if j >= n:
                    raise UnterminatedError("a quoted string or name never ends")
                if escapes and sql[j] == "\\":
                    j += 2
                    continue
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            yield Token("string" if c == "'" else "ident", sql[i:j + 1])
            i = start = j + 1
        elif c == "$":
            tag = _TAG.match(sql, i)
            param = _PARAM.match(sql, i)
            preceded = i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$")
            if tag and not preceded:
                yield from code(i)
                end = sql.find(tag.group(0), tag.end())
                if end < 0:
                    raise UnterminatedError("a dollar-quoted body never ends")
                end += len(tag.group(0))
                yield Token("dollar", sql[i:end])
                i = start = end
            elif param and not preceded:
                yield from code(i)
                yield Token("param", param.group(0))
                i = start = param.end()
            else:
                i += 1
        elif c == ";":
            yield from code(i)
            yield Token("semicolon", ";")
            i = start = i + 1
        elif _IDENT_START.match(c):
            ident = _IDENT.match(sql, i + 1)  # zero or more characters: always a match
            i = ident.end() if ident else i + 1
        else:
            i += 1
    yield from code(n)


@dataclass(frozen=True)
class Statement:
    """One statement of a file and the `$name` parameters it names, in order of first use."""

    query: str
    named_parameters: tuple[str, ...]


def _meaningful(pieces: list[Token]) -> bool:
    return any(t.kind not in ("comment",) and t.text.strip() for t in pieces)


@lru_cache(maxsize=512)
def split(sql: str) -> tuple[Statement, ...]:
    """The statements of `sql`, each with the parameters it names; comments stay with the statement after them."""
    found: list[Statement] = []
    pieces: list[Token] = []
    for token in [*tokens(sql), Token("semicolon", "")]:
        if token.kind != "semicolon":
            pieces.append(token)
            continue
        if _meaningful(pieces):
            names = tuple(dict.fromkeys(t.text[1:] for t in pieces if t.kind == "param"))
            found.append(Statement("".join(t.text for t in pieces).strip(), names))
        pieces = []
    return tuple(found)


@lru_cache(maxsize=1024)
def to_pyformat(sql: str, positional: bool = False) -> str:
    """`sql` for psycopg: `$name` becomes `%(name)s` (or `?` becomes `%s`) and a literal `%` is doubled."""
    out: list[str] = []
    for token in tokens(sql):
        if token.kind == "param":
            out.append(f"%({token.text[1:]})s")
        elif token.kind == "code":
            text = token.text.replace("%", "%%")
            out.append(text.replace("?", "%s") if positional else text)
        else:
            out.append(token.text)
    return "".join(out)


def words(sql: str) -> list[str]:
    """The bare words of `sql` outside literals and comments, lower-cased (keywords, names, function names);
    a quoted name counts as the word it spells."""
    found: list[str] = []
    for token in tokens(sql):
        if token.kind == "code":
            found += [w.lower() for w in _WORD.findall(token.text)]
        elif token.kind == "ident":
            found.append(token.text[1:-1].replace('""', '"').lower())
    return found
