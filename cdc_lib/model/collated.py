"""Text comparisons a row filter leaves to the server: the questions, their answers, and a bounded cache of them.

A row filter on a text column (`status = 'active'`, `region IN ('eu', 'uk')`) compares under the column's collation:
case- and accent-folding, PAD SPACE or NO PAD, expansions (`'ß' = 'ss'` under some), each server's own tables.
binlake does not reimplement collations. A comparison of two literals under a collation depends on nothing else, so
the server answers it exactly whatever the row holds now: `Question` is (character set, collation, the row's value,
the filter's literal), and its answer is the sign of the value against the literal (-1, 0, 1).

`TextAnswers` is what the evaluator consults: answers already known (this batch or an earlier one: `AnswerCache`,
an LRU), and for the rest one call to `ask` with every missing question at once (`prefetch`), which the source's
asker turns into one round trip (`cdc_lib.source.text_compare`). The evaluation then finishes in Python with SQL's
three-valued logic (`cdc_lib.model.row_filter`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

#: (character set, collation, value, literal): how `value` (a row's, decoded) compares with `literal` (the filter's).
Question: TypeAlias = tuple[str, str, str, str]
#: Answers the questions, in order, with the sign of value against literal under the collation (-1, 0 or 1).
Ask: TypeAlias = Callable[[Sequence[Question]], Sequence[int]]


class AnswerCache:
    """Signs already answered, least recently used first out, bounded by entries and by characters held.

    The key holds the collation, so one cache serves every column of a server; a value longer than `max_value_chars`
    is answered but not kept (a TEXT column's long values would crowd out the short ones that repeat).
    """

    def __init__(self, *, max_entries: int = 100_000, max_chars: int = 32_000_000, max_value_chars: int = 4096) -> None:
        self.max_entries, self.max_chars, self.max_value_chars = max_entries, max_chars, max_value_chars
        self._signs: OrderedDict[Question, int] = OrderedDict()
        self._chars = 0
        # One cache per server, shared by the reads of one process (a sync beside a snapshot's window scan).
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._signs)

    def get(self, question: Question) -> int | None:
        with self._lock:
            sign = self._signs.get(question)
            if sign is not None:
                self._signs.move_to_end(question)
            return sign

    def put(self, question: Question, sign: int) -> None:
        size = len(question[2]) + len(question[3])
        with self._lock:
            if size > self.max_value_chars or question in self._signs:
                return
            self._signs[question] = sign
            self._chars += size
            while len(self._signs) > self.max_entries or self._chars > self.max_chars:
                old, _ = self._signs.popitem(last=False)
                self._chars -= len(old[2]) + len(old[3])


class TextAnswers:
    """The answers one read uses: the cache first, then `ask` for what it lacks.

    `prefetch` asks every missing question of a set in one call; `sign` asks a single one only when no prefetch
    covered it. `round_trips` and `asked` count the calls and the questions sent (for tests and measurements).
    """

    def __init__(self, ask: Ask, cache: AnswerCache | None = None) -> None:
        self.ask = ask
        self.cache = cache if cache is not None else AnswerCache()
        #: Answers of this read, whatever the cache keeps: a prefetched answer is never asked twice in a read.
        self._read: dict[Question, int] = {}
        self.round_trips = 0
        self.asked = 0

    def prefetch(self, questions: Iterable[Question]) -> None:
        """Ask, in one call, every question of `questions` not answered yet."""
        missing = list(dict.fromkeys(q for q in questions if q not in self._read and self._cached(q) is None))
        if missing:
            self._answer(missing)

    def sign(self, question: Question) -> int:
        """The sign of the question's value against its literal under its collation."""
        sign = self._read.get(question)
        if sign is None:
            sign = self._cached(question)
        if sign is None:
            self._answer([question])
            sign = self._read[question]
        return sign

    def _cached(self, question: Question) -> int | None:
        sign = self.cache.get(question)
        if sign is not None:
            self._read[question] = sign
        return sign

    def _answer(self, questions: list[Question]) -> None:
        signs = self.ask(questions)
        if len(signs) != len(questions):
            raise RuntimeError(f"{len(questions)} text comparisons asked, {len(signs)} answered")
        self.round_trips += 1
        self.asked += len(questions)
        for question, sign in zip(questions, signs, strict=True):
            self._read[question] = sign
            self.cache.put(question, sign)


__all__ = ["AnswerCache", "Ask", "Question", "TextAnswers"]
