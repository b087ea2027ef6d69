"""Reading SQL text the way PostgreSQL does, for what DuckDB's parser does for itself.

scanwatch's files name their parameters `$name` and a file may hold several statements. DuckDB splits and
binds them itself (`extract_statements`); for PostgreSQL, whose driver knows neither, SQLGlot's PostgreSQL
tokenizer finds the statements, the parameters each names and the words it is made of: string literals,
quoted identifiers, comments and dollar-quoted bodies are tokens of their own (or no token), so a `;` or a
`$` inside one of them is never taken for SQL. Every piece is cut from the text by the tokens' offsets, so a
statement is sent exactly as written.

It reads scanwatch's own files, and shapes friendly messages about a user's text: it is no boundary. The
read door's safety comes from the server (one statement through the extended protocol, a READ ONLY
transaction, the role; `read_door.py` beside this file), so a text the tokenizer misreads can only get a
less helpful line, never past the door.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]  # sqlglot re-exports them without __all__

from pipelines.storage.destinations.base import Statement


class _Tokenizer(Postgres.Tokenizer):
    """PostgreSQL's tokens, every statement lexed through: SQLGlot keeps the rest of a "command" (EXPLAIN, SHOW,
    FETCH, ...) as one raw string, which would hide its words, literals and semicolons."""

    COMMANDS = set[TokenType]()


_DIALECT = Postgres()
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_WORD = re.compile(r"[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*")
# Tokens whose text is a literal or a quoted name: never code, never a parameter.
_LITERALS = {TokenType.STRING, TokenType.BYTE_STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING,
             TokenType.HEREDOC_STRING, TokenType.BIT_STRING, TokenType.HEX_STRING, TokenType.UNICODE_STRING,
             TokenType.IDENTIFIER}


class UnterminatedError(ValueError):
    """A string, quoted name, comment or dollar-quoted body that never ends."""


@lru_cache(maxsize=1024)
def _tokens(sql: str) -> tuple[Token, ...]:
    try:
        # A tokenizer per call: SQLGlot's keeps its position on the instance, so one shared by the threads of a
        # process (several workspaces' writers) mixes their texts.
        tokens = tuple(_Tokenizer().tokenize(sql))
    except TokenError:
        raise UnterminatedError("a quoted string, name or dollar-quoted body never ends") from None
    rest = sql[tokens[-1].end + 1:] if tokens else sql
    if "/*" in rest and _open_comment(rest):  # the tokenizer takes such a comment to the end silently
        raise UnterminatedError("a /* comment never ends")
    return tokens


def _open_comment(rest: str) -> bool:
    """Whether text after the last token (comments and whitespace) ends inside a /* comment."""
    depth = i = 0
    while i < len(rest):
        if rest.startswith("--", i) and depth == 0:
            newline = rest.find("\n", i)
            i = len(rest) if newline < 0 else newline
        elif rest.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif rest.startswith("*/", i) and depth:
            depth, i = depth - 1, i + 2
        else:
            i += 1
    return depth > 0


def _parameters(tokens: tuple[Token, ...]) -> dict[int, str]:
    """Index of each `$` that starts a `$name` parameter -> the name (the name's token follows it at once)."""
    found = {}
    for i, token in enumerate(tokens[:-1]):
        after = tokens[i + 1]
        if token.token_type == TokenType.PARAMETER and after.start == token.end + 1 \
                and after.token_type not in _LITERALS and _NAME.match(after.text):
            found[i] = after.text
    return found


@lru_cache(maxsize=512)
def split(sql: str) -> tuple[Statement, ...]:
    """The statements of `sql`, each with the parameters it names; comments stay with the statement after them."""
    tokens = _tokens(sql)
    params = _parameters(tokens)
    found: list[Statement] = []
    start, first = 0, 0
    for i, token in enumerate([*tokens, None]):
        if token is not None and token.token_type != TokenType.SEMICOLON:
            continue
        end = token.start if token is not None else len(sql)
        if i > first:  # a token between two semicolons: a statement, not a comment alone
            names = tuple(dict.fromkeys(params[j] for j in range(first, i) if j in params))
            found.append(Statement(sql[start:end].strip(), names))
        start = end + 1
        first = i + 1
    return tuple(found)


@lru_cache(maxsize=1024)
def to_pyformat(sql: str, positional: bool = False) -> str:
    """`sql` for psycopg: `$name` becomes `%(name)s` (or `?` becomes `%s`) and a literal `%` is doubled; text in
    literals, quoted names and comments is left as written."""
    tokens = _tokens(sql)
    params = _parameters(tokens)
    out: list[str] = []
    at = 0
    skip = -1
    for i, token in enumerate(tokens):
        out.append(sql[at:token.start])  # whitespace and comments between tokens
        at = token.end + 1
        piece = sql[token.start:at]
        if i == skip:
            continue
        if i in params:
            out.append(f"%({params[i]})s")
            skip = i + 1
            at = tokens[i + 1].end + 1
        elif token.token_type in _LITERALS:
            out.append(piece)
        elif positional and token.token_type == TokenType.PLACEHOLDER and piece == "?":
            out.append("%s")
        else:
            out.append(piece.replace("%", "%%"))
    out.append(sql[at:])
    return "".join(out)


def words(sql: str) -> list[str]:
    """The bare words of `sql` outside literals and comments, lower-cased (keywords, names, function names);
    a quoted name counts as the word it spells."""
    tokens = _tokens(sql)
    params = _parameters(tokens)
    names = {i + 1 for i in params}
    found: list[str] = []
    for i, token in enumerate(tokens):
        if i in names:
            continue
        if token.token_type == TokenType.IDENTIFIER:
            found.append(token.text.lower())
        elif token.token_type not in _LITERALS:  # a keyword of several words (ORDER BY) is one token
            found += [w.lower() for w in _WORD.findall(token.text)]
    return found
