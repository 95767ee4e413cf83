"""The CLI's last line of defence: one line per failure, and no secret in it or in the logs."""

from __future__ import annotations

import logging

from cdc_lib.cli import RedactSecrets, redact, summarize


def test_redaction_covers_messages_and_tracebacks() -> None:
    assert redact("user cdc password hunter2!", ["hunter2!", ""]) == "user cdc password ***"
    record = logging.LogRecord("binlake", logging.ERROR, __file__, 1, "connect %s", ("pw=hunter2!",), None)
    try:
        raise RuntimeError("failed with hunter2! in it")
    except RuntimeError as exc:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    RedactSecrets(["hunter2!"]).filter(record)
    text = logging.Formatter().format(record)
    assert "hunter2!" not in text and "connect pw=***" in text and "failed with *** in it" in text


def test_summary_is_one_line_and_prefers_the_java_exception() -> None:
    assert summarize(ValueError("first line\n  second line")) == "first line"

    class JavaException:
        def toString(self) -> str:  # noqa: N802 - py4j's name
            return "java.io.IOException: Mkdirs failed to create /lake/t\n\tat org.apache..."

    class Py4JLike(Exception):
        java_exception = JavaException()

    assert summarize(Py4JLike("An error occurred while calling o59.save.")) == (
        "java.io.IOException: Mkdirs failed to create /lake/t"
    )
