"""A pymysql connection stand-in that answers each statement by its prefix, for the source tests that need no
server."""

from __future__ import annotations

from typing import Any


class FakeCursor:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, arguments: Any = None) -> None:
        for prefix, answer in self.answers.items():
            if sql.startswith(prefix):
                if isinstance(answer, BaseException):
                    raise answer
                self.rows = answer
                return
        raise AssertionError(f"unexpected query {sql}")

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class FakeConnection:
    host, port = "db.example", 3306

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.answers)
