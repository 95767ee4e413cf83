"""How the `binlake` command logs: levels, text or JSON lines on stderr, secrets redacted, Spark's output in a file.

stdout carries only a command's result (status tables, JSON documents); binlake's log lines go to stderr; the
JVM that Spark starts writes its own output (SLF4J and JVM warnings, log4j lines) to a file under `log_dir()`.
What native code writes to the process's stderr (a Rust panic from delta-rs, printed by Rust's panic hook with
its backtrace) and the traceback of an unexpected failure go to the run's log file there too
(`native_stderr_to`, `run_log_path`), not to the user's terminal.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TextIO

Verbosity = Literal["quiet", "normal", "verbose"]
LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

LOG_DIR_ENV_VAR = "BINLAKE_LOG_DIR"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Record attributes a JSON line carries when a caller sets them (`log.info(..., extra={"table": name})`).
CONTEXT_FIELDS = ("pipeline", "table")
# Spark log files kept per folder: one per JVM start, so a busy schedule does not fill the disk.
KEEP_SPARK_LOGS = 20
# Libraries whose INFO lines say nothing a binlake user acts on, even with --verbose.
_NOISY_LOGGERS = ("py4j", "pymysqlreplication", "botocore", "urllib3")


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


class RedactSecrets(logging.Filter):
    """Replace known secret values in every log record, whoever logs it."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = [secret for secret in secrets if secret]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            record.msg, record.args = redact(record.getMessage(), self.secrets), None
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = redact(record.exc_text, self.secrets)
        return True


class AddContext(logging.Filter):
    """Stamp fields (the pipeline's name) on records that do not carry them already."""

    def __init__(self, fields: Mapping[str, str]) -> None:
        super().__init__()
        self.fields = dict(fields)

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in self.fields.items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, then `pipeline` and `table` when
    the record carries them, and `exception` for a traceback. Log shippers (Loki, Elasticsearch, CloudWatch)
    read these without a parsing rule."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                document[name] = str(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            document["exception"] = record.exc_text
        return json.dumps(document, ensure_ascii=False)


def about_table(name: str) -> dict[str, str]:
    """`extra=` of a log line about one table: the JSON format's `table` field (`log.info(..., extra=...)`)."""
    return {"table": name}


def log_formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def configure_logging(
    verbosity: Verbosity = "normal",
    secrets: Sequence[str] = (),
    *,
    log_format: LogFormat = "text",
    context: Mapping[str, str] | None = None,
) -> None:
    """One stderr handler on the root logger, so every library's records get the same format and redaction.

    quiet: warnings and errors only. normal: binlake's INFO lines and other libraries' warnings.
    verbose: binlake's DEBUG lines and other libraries' INFO lines (not py4j's or botocore's chatter).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(log_formatter(log_format))
    handler.addFilter(RedactSecrets(secrets))
    if context:
        handler.addFilter(AddContext(context))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbosity == "verbose" else logging.WARNING)
    binlake_level = {"quiet": logging.WARNING, "normal": logging.INFO, "verbose": logging.DEBUG}[verbosity]
    logging.getLogger("binlake").setLevel(binlake_level)
    for noisy in _NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Python warnings (a library's FutureWarning) otherwise bypass the handler: no format, no redaction.
    logging.captureWarnings(True)


def log_dir(environ: Mapping[str, str] | None = None, *, workdir: str | os.PathLike[str] | None = None) -> Path:
    """Where Spark's log files go: $BINLAKE_LOG_DIR, else `<workdir>/logs` for the demo, else the user's cache
    ($XDG_CACHE_HOME or ~/.cache) under binlake/logs, next to the jar cache."""
    environ = os.environ if environ is None else environ
    configured = environ.get(LOG_DIR_ENV_VAR)
    if configured:
        return Path(configured)
    if workdir is not None:
        return Path(workdir) / "logs"
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "binlake" / "logs"


def spark_log_path(directory: Path, *, now: float | None = None, pid: int | None = None) -> Path:
    """A new file name for one JVM's output (time and pid keep concurrent runs apart); older files beyond the
    newest `KEEP_SPARK_LOGS` are removed."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    path = directory / f"spark-{stamp}-{os.getpid() if pid is None else pid}.log"
    if directory.is_dir():
        for stale in sorted(directory.glob("spark-*.log"), reverse=True)[KEEP_SPARK_LOGS - 1:]:
            stale.unlink(missing_ok=True)  # another run may prune the same file at the same time
    return path


def run_log_path(directory: Path, *, now: float | None = None, pid: int | None = None) -> Path:
    """A new file name for one run's native output and tracebacks (`binlake-<time>-<pid>.log`); older files
    beyond the newest `KEEP_SPARK_LOGS` are removed, as Spark's are."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    path = directory / f"binlake-{stamp}-{os.getpid() if pid is None else pid}.log"
    if directory.is_dir():
        for stale in sorted(directory.glob("binlake-*.log"), reverse=True)[KEEP_SPARK_LOGS - 1:]:
            stale.unlink(missing_ok=True)
    return path


@contextmanager
def native_stderr_to(path: Path) -> Iterator[bool]:
    """Within this block, file descriptor 2 (what native code writes to: Rust's panic hook in delta-rs, C
    libraries, child processes started here) goes to `path`, appended; Python's `sys.stderr` (binlake's log
    lines and error messages) keeps the terminal. Yields whether it could: a stderr that is not the process's
    own (a test's capture) or a file that cannot be opened leaves everything as it was.

    A panic in delta-rs surfaces in Python as an exception, which binlake reports on one line with its remedy;
    the panic's own text and backtrace are for a bug report, so they belong in the file. An empty file is
    removed on exit.
    """
    stream: TextIO = sys.stderr
    if not _on_descriptor_2(stream):
        yield False
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        yield False
        return
    stream.flush()
    terminal = os.dup(2)
    os.dup2(target, 2)
    os.close(target)
    # Line-buffered like the terminal's stderr; errors never stop a message (a stray byte is escaped).
    sys.stderr = os.fdopen(terminal, "w", buffering=1, encoding=stream.encoding,
                           errors="backslashreplace", closefd=False)
    try:
        yield True
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)
        os.close(terminal)
        sys.stderr = stream
        try:
            if path.stat().st_size == 0:
                path.unlink()
        except OSError:
            pass


def _on_descriptor_2(stream: TextIO | None) -> bool:
    """Whether `stream` is the process's own stderr (not a replacement, such as a test's capture)."""
    if stream is None or stream is not sys.__stderr__:
        return False
    try:
        return bool(sys.__stderr__.fileno() == 2)
    except (OSError, ValueError, AttributeError):  # a capture without a descriptor (pytest's capsys)
        return False
