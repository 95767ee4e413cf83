"""The CLI's log lines: levels per flag, text or one JSON object per line, secrets redacted in both."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_lib.cli import build_parser, main
from cdc_lib.common.logs import (
    KEEP_SPARK_LOGS,
    JsonFormatter,
    RedactSecrets,
    configure_logging,
    log_dir,
    spark_log_path,
)
from cdc_lib.sink.spark import session as spark

SECRET = 'pw"with\\quotes'


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root, binlake = logging.getLogger(), logging.getLogger("binlake")
    handlers, root_level, binlake_level = root.handlers[:], root.level, binlake.level
    yield
    root.handlers[:] = handlers
    root.setLevel(root_level)
    binlake.setLevel(binlake_level)
    logging.captureWarnings(False)


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("binlake", logging.WARNING, __file__, 7, message, args, None)
    record.__dict__.update(extra)
    return record


def test_json_line_carries_time_level_logger_message_and_context() -> None:
    record = _record("%s: %d rows", "shop.orders", 3, table="shop.orders", pipeline="shop")
    record.created = 1_767_225_600.25  # 2026-01-01T00:00:00.250Z
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2026-01-01T00:00:00.250Z", "level": "WARNING", "logger": "binlake",
        "message": "shop.orders: 3 rows", "pipeline": "shop", "table": "shop.orders",
    }
    assert set(json.loads(JsonFormatter().format(_record("plain")))) == {"time", "level", "logger", "message"}


def test_json_and_text_redact_messages_and_tracebacks_alike() -> None:
    def failing_record() -> logging.LogRecord:
        record = _record("connect with %s\nsecond line", SECRET)
        try:
            raise RuntimeError(f"refused {SECRET}")
        except RuntimeError as exc:
            record.exc_info = (type(exc), exc, exc.__traceback__)
        RedactSecrets([SECRET]).filter(record)
        return record

    document = json.loads(JsonFormatter().format(failing_record()))
    text = logging.Formatter().format(failing_record())
    assert SECRET not in json.dumps(document) and SECRET not in text
    assert document["message"] == "connect with ***\nsecond line" and "connect with ***" in text
    assert "RuntimeError: refused ***" in document["exception"] and "RuntimeError: refused ***" in text


@pytest.mark.parametrize(
    ("flags", "shown"),
    [
        (["--quiet"], {"binlake WARNING"}),
        ([], {"binlake INFO", "binlake WARNING"}),
        (["--verbose"], {"binlake DEBUG", "binlake INFO", "binlake WARNING", "other INFO"}),
    ],
)
def test_flags_set_the_levels(flags: list[str], shown: set[str], restore_logging: None,
                              capsys: pytest.CaptureFixture[str]) -> None:
    arguments = build_parser().parse_args([*flags, "status"])
    configure_logging("verbose" if arguments.verbose else "quiet" if arguments.quiet else "normal")
    for name in ("binlake", "other", "py4j"):
        for level in (logging.DEBUG, logging.INFO, logging.WARNING):
            logging.getLogger(name).log(level, "%s %s", name, logging.getLevelName(level))
    lines = capsys.readouterr().err.splitlines()
    assert {line.split(": ", 1)[1] for line in lines} == shown | {"other WARNING", "py4j WARNING"}


def test_quiet_and_verbose_exclude_each_other_and_formats_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["-q", "-v", "status"], ["--log-format", "xml", "status"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
    assert build_parser().parse_args(["status"]).log_format == "text"


def test_json_format_applies_to_every_logger_with_the_pipeline(restore_logging: None,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("normal", [SECRET], log_format="json", context={"pipeline": "shop"})
    logging.getLogger("binlake").info("using %s", SECRET, extra={"table": "shop.orders"})
    logging.getLogger("pyspark").warning("careful")
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first == {**first, "message": "using ***", "pipeline": "shop", "table": "shop.orders", "level": "INFO"}
    assert second["logger"] == "pyspark" and second["pipeline"] == "shop" and "table" not in second


def test_a_failing_command_prints_one_line_on_stderr_and_nothing_on_stdout(
    restore_logging: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--log-format", "json", "--config", str(tmp_path / "absent.yaml"), "status"])
    captured = capsys.readouterr()
    assert code != 0 and captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("binlake: error: ") and "does not exist" in line


def test_log_dir_order() -> None:
    assert log_dir({"BINLAKE_LOG_DIR": "/var/log/binlake", "XDG_CACHE_HOME": "/c"}, workdir="w") == Path(
        "/var/log/binlake"
    )
    assert log_dir({"XDG_CACHE_HOME": "/c"}, workdir="demo") == Path("demo/logs")
    assert log_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/binlake/logs")
    assert log_dir({}) == Path.home() / ".cache" / "binlake" / "logs"


def test_spark_log_names_sort_by_time_and_old_ones_are_pruned(tmp_path: Path) -> None:
    names = [spark_log_path(tmp_path, now=1_767_225_600 + second, pid=42).name for second in (0, 1)]
    assert names == ["spark-20260101T000000Z-42.log", "spark-20260101T000001Z-42.log"]
    written = []
    for second in range(KEEP_SPARK_LOGS + 5):
        path = spark_log_path(tmp_path, now=1_767_225_600 + second, pid=7)
        path.write_text("x")
        written.append(path.name)
    (tmp_path / "other.log").write_text("kept")
    newest = spark_log_path(tmp_path, now=1_767_300_000, pid=7)
    kept = sorted(path.name for path in tmp_path.glob("spark-*.log"))
    assert kept == written[-(KEEP_SPARK_LOGS - 1):], "the newest stay, with room for the new file"
    assert not newest.exists(), "created only when a JVM starts"
    assert (tmp_path / "other.log").exists()


def test_jvm_output_routing_is_scoped(tmp_path: Path) -> None:
    before = spark._jvm_output
    with spark.jvm_output_to(tmp_path / "a.log"):
        assert spark._jvm_output == tmp_path / "a.log"
        with spark.jvm_output_to(None):
            assert spark._jvm_output is None
        assert spark._jvm_output == tmp_path / "a.log"
    assert spark._jvm_output is before
