"""MySQL/MariaDB statement text → tokens, and a cursor over them that reads names and keywords.

The lexical half of `cdc_lib.binlog.ddl`: backtick identifiers, strings, `/* */`, `-- ` and `#` comments, and
executable comments (`/*!50100 … */`, `/*M!100100 … */`), whose contents are code because the server that wrote
the binlog ran them. A statement that does not lex or read as expected raises `Unreadable`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# -- tokens -------------------------------------------------------------------------------

TokenKind = Literal["word", "ident", "string", "number", "punct"]


@dataclass(frozen=True)
class Token:
    kind: TokenKind  # word: an unquoted word (keyword or identifier); ident: a `quoted` identifier
    text: str

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""

    @property
    def is_name(self) -> bool:
        return self.kind in ("word", "ident")


_WORD = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]+")
_NUMBER = re.compile(r"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?")
EXECUTABLE_COMMENT = re.compile(r"/\*M?!\d*")


class Unreadable(Exception):
    """The statement does not follow the grammar this module reads."""


def tokenize(statement: str) -> list[Token]:
    """MySQL/MariaDB tokens; comments dropped, executable comments' contents kept as code."""
    tokens: list[Token] = []
    i, n = 0, len(statement)
    while i < n:
        char = statement[i]
        if char.isspace():
            i += 1
        elif statement.startswith("/*", i):
            executable = EXECUTABLE_COMMENT.match(statement, i)
            if executable:
                i = executable.end()  # the contents are code; the closing */ is skipped below
                continue
            end = statement.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif statement.startswith("*/", i):
            i += 2  # the end of an executable comment
        elif char == "#" or (statement.startswith("--", i) and (i + 2 == n or statement[i + 2].isspace())):
            end = statement.find("\n", i)
            i = n if end < 0 else end + 1
        elif char in "`\"'":
            j, text = i + 1, []
            while True:
                if j >= n:
                    raise Unreadable("unterminated quote")
                if statement[j] == "\\" and char != "`" and j + 1 < n:
                    text.append(statement[j : j + 2])
                    j += 2
                elif statement[j] == char:
                    if j + 1 < n and statement[j + 1] == char:  # a doubled quote stands for itself
                        text.append(char)
                        j += 2
                    else:
                        break
                else:
                    text.append(statement[j])
                    j += 1
            tokens.append(Token("ident" if char == "`" else "string", "".join(text)))
            i = j + 1
        elif char.isdigit() or (char == "." and i + 1 < n and statement[i + 1].isdigit() and not _after_name(tokens)):
            number = _NUMBER.match(statement, i)
            word = _WORD.match(statement, i)
            # 1abc is an identifier in MySQL; 12 and 1.5e3 are numbers.
            if word and (not number or word.end() > number.end()):
                tokens.append(Token("word", word.group()))
                i = word.end()
            else:
                assert number is not None
                tokens.append(Token("number", number.group()))
                i = number.end()
        else:
            word = _WORD.match(statement, i)
            if word:
                tokens.append(Token("word", word.group()))
                i = word.end()
            else:
                tokens.append(Token("punct", char))
                i += 1
    return tokens


def _after_name(tokens: list[Token]) -> bool:
    return bool(tokens) and tokens[-1].is_name


# -- reading ------------------------------------------------------------------------------


class StatementReader:
    """A cursor over the tokens of one statement."""

    def __init__(self, tokens: list[Token], default_schema: str) -> None:
        self.tokens = tokens
        self.at = 0
        self.default_schema = default_schema

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def keyword(self, ahead: int = 0) -> str:
        token = self.peek(ahead)
        return token.upper if token else ""

    def accept(self, *words: str) -> bool:
        """Consume the keyword sequence `words` if it comes next."""
        if all(self.keyword(offset) == word for offset, word in enumerate(words)):
            self.at += len(words)
            return True
        return False

    def accept_punct(self, char: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "punct" and token.text == char:
            self.at += 1
            return True
        return False

    def done(self) -> bool:
        return self.at >= len(self.tokens) or (self.accept_punct(";") and self.at >= len(self.tokens))

    def name(self) -> str:
        """A table name, `db`.`t` or t (in the default schema)."""
        first = self.peek()
        if first is None or not first.is_name:
            raise Unreadable("a table name was expected")
        self.at += 1
        if self.accept_punct("."):
            second = self.peek()
            if second is None or not second.is_name:
                raise Unreadable("a table name was expected after the database")
            self.at += 1
            return f"{first.text}.{second.text}"
        return f"{self.default_schema}.{first.text}"

    def names(self) -> list[str]:
        result = [self.name()]
        while self.accept_punct(","):
            result.append(self.name())
        return result

    def skip_wait(self) -> None:
        if self.accept("WAIT"):
            self.at += 1
        else:
            self.accept("NOWAIT")


def top_level_clauses(tokens: list[Token]) -> list[list[Token]]:
    """Split an ALTER TABLE's specification at its top-level commas."""
    clauses: list[list[Token]] = [[]]
    depth = 0
    for token in tokens:
        if token.kind == "punct" and token.text == "(":
            depth += 1
        elif token.kind == "punct" and token.text == ")":
            depth -= 1
        elif token.kind == "punct" and token.text == "," and depth == 0:
            clauses.append([])
            continue
        elif token.kind == "punct" and token.text == ";" and depth == 0:
            continue
        clauses[-1].append(token)
    return [clause for clause in clauses if clause]
