"""The CLI's last line of defence: one line per failure, and no secret in it or in the logs."""

from __future__ import annotations

import logging
from typing import Any

from cdc_lib.cli import summarize
from cdc_lib.common.logs import RedactSecrets, redact
from cdc_lib.display.report import format_status


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


def test_status_table_shows_the_runway_and_its_warning() -> None:
    from cdc_lib.pipeline.pipeline import TableStatus

    runway = {"purged": False, "needed_file": "bin.000002", "runway_seconds": 7200.0,
              "oldest_on_server": "bin.000001", "oldest_on_server_age_seconds": 36000.0}
    base: dict[str, Any] = dict(table="shop.t", snapshotted=True, consistent=True, position="bin.000002:4",
                                high_watermark="-", delta_version=1, lag_bytes=0, lag_events=0, lag_seconds=0.0,
                                error=None)
    text = format_status([
        TableStatus(**base, runway=runway, runway_warning=True),
        TableStatus(**{**base, "table": "shop.u"}, runway={**runway, "runway_seconds": None}),
        TableStatus(**{**base, "table": "shop.v"}, runway={**runway, "purged": True}, runway_warning=True),
    ])
    lines = text.splitlines()
    assert "runway" in lines[0]
    assert "WARNING 2.0h (oldest bin.000001, 10.0h old)" in lines[1]
    assert "unbounded" in lines[2] and "WARNING" not in lines[2]
    assert "WARNING PURGED (bin.000002)" in lines[3]
