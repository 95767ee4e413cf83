"""The OpenMetrics text binlake writes itself: names, types, units, labels; Prometheus's own parsers read it."""

from __future__ import annotations

import math
import socket
import threading
import urllib.error
import urllib.request
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families as prometheus_families

from cdc_lib.config.model import MetricsConfig
from cdc_lib.errors import ConfigError
from cdc_lib.status.metrics import (
    CONTENT_TYPE,
    TABLE_STATES,
    BatchMetrics,
    Family,
    Histogram,
    Sample,
    TableFigures,
    TableLayout,
    figures_of,
    render,
    table_families,
    table_state,
)
from cdc_lib.status.metrics_server import MetricsServer, start_metrics_server
from cdc_lib.status.table_status import TableStatus


def _status(**changes: Any) -> TableStatus:
    base = TableStatus(
        table="shop.orders", snapshotted=True, consistent=True, position="mysql-bin.000001:400",
        high_watermark="mysql-bin.000001:300", delta_version=7, lag_bytes=0, lag_events=0, lag_seconds=0.0,
        error=None, runway={"runway_seconds": 7200.0, "purged": False}, rows_applied={"insert": 3, "update": 2,
                                                                                     "delete": 1},
        snapshot_at="2026-11-27T10:00:00+00:00",
    )
    return replace(base, **changes)


def _parsed(text: str) -> dict[str, Any]:
    return {family.name: family for family in openmetrics_families(text)}


def _value(families: dict[str, Any], family: str, sample: str, **labels: str) -> float:
    matches = [s.value for s in families[family].samples if s.name == sample and
               all(s.labels.get(key) == value for key, value in labels.items())]
    assert len(matches) == 1, (family, sample, labels, families[family].samples)
    return float(matches[0])


@pytest.mark.parametrize(
    ("changes", "state"),
    [
        ({}, "healthy"),
        ({"error": "schema change: column dropped"}, "stopped"),
        ({"retrying": {"cause": "S3 503"}}, "retrying"),
        ({"retrying": {"cause": "S3 503"}, "error": "stopped"}, "stopped"),
        ({"snapshot_in_flight": "running 1/4 chunks"}, "snapshotting"),
        ({"consistent": False}, "snapshotting"),
        ({"snapshotted": False}, "snapshotting"),
    ],
)
def test_table_state(changes: dict[str, Any], state: str) -> None:
    assert table_state(_status(**changes)) == state


def test_table_families_parse_with_the_openmetrics_parser_and_hold_the_figures() -> None:
    tables = [
        figures_of(_status(lag_seconds=12.5, lag_bytes=4096, lag_events=17), TableLayout(files=4, bytes=123_456)),
        figures_of(_status(table="shop.items", error="stopped: a DROP COLUMN", runway={"runway_seconds": None,
                                                                                          "purged": False})),
        figures_of(TableStatus.not_snapshotted("shop.new")),
    ]
    text = render(table_families("p1", tables, collected_at=1_700_000_000.0))
    assert text.endswith("# EOF\n")
    families = _parsed(text)
    assert families["binlake_lag_seconds"].type == "gauge"
    assert families["binlake_lag_seconds"].unit == "seconds"
    assert families["binlake_lag_bytes"].unit == "bytes"
    assert families["binlake_rows_applied"].type == "counter"
    assert _value(families, "binlake_lag_seconds", "binlake_lag_seconds", table="shop.orders") == 12.5
    assert _value(families, "binlake_lag_bytes", "binlake_lag_bytes", table="shop.orders", pipeline="p1") == 4096
    assert _value(families, "binlake_lag_events", "binlake_lag_events", table="shop.orders") == 17
    for operation, count in (("insert", 3), ("update", 2), ("delete", 1)):
        assert _value(families, "binlake_rows_applied", "binlake_rows_applied_total", table="shop.orders",
                      operation=operation) == count
        # The count began with the table's snapshot: `_created` says when, so a new snapshot reads as a reset.
        assert _value(families, "binlake_rows_applied", "binlake_rows_applied_created", table="shop.orders",
                      operation=operation) == 1_795_773_600.0
    assert _value(families, "binlake_table_state", "binlake_table_state", table="shop.items", state="stopped") == 1
    assert _value(families, "binlake_table_state", "binlake_table_state", table="shop.items", state="healthy") == 0
    assert _value(families, "binlake_table_state", "binlake_table_state", table="shop.new",
                  state="snapshotting") == 1
    assert {s.labels["state"] for s in families["binlake_table_state"].samples} == set(TABLE_STATES)
    assert _value(families, "binlake_binlog_runway_seconds", "binlake_binlog_runway_seconds",
                  table="shop.orders") == 7200
    assert math.isinf(_value(families, "binlake_binlog_runway_seconds", "binlake_binlog_runway_seconds",
                             table="shop.items"))
    assert _value(families, "binlake_table_files", "binlake_table_files", table="shop.orders") == 4
    assert _value(families, "binlake_table_bytes", "binlake_table_bytes", table="shop.orders") == 123_456
    # Unknown figures are left out, not written as 0: a table not snapshotted has no lag and counted no row.
    assert not [s for s in families["binlake_lag_seconds"].samples if s.labels["table"] == "shop.new"]
    assert not [s for s in families["binlake_rows_applied"].samples if s.labels["table"] == "shop.new"]
    # Prometheus's classic text parser reads it too (a textfile collector may hand it on in that format).
    assert {family.name for family in prometheus_families(text)} >= {"binlake_lag_seconds", "binlake_table_state"}


def test_every_sample_carries_pipeline_and_table_and_names_follow_the_conventions() -> None:
    tables = [figures_of(_status(snapshot_progress={"chunks_done": 2, "chunks_total": 5, "rows_done": 900}),
                         TableLayout(files=1, bytes=10))]
    families = _parsed(render(table_families("p1", tables, collected_at=1.0)))
    assert _value(families, "binlake_snapshot_chunks_done", "binlake_snapshot_chunks_done") == 2
    assert _value(families, "binlake_snapshot_chunks_planned", "binlake_snapshot_chunks_planned") == 5
    assert _value(families, "binlake_snapshot_rows_read", "binlake_snapshot_rows_read") == 900
    for name, family in families.items():
        assert name.startswith("binlake_")
        if family.unit:
            assert name.endswith(f"_{family.unit}")
        for sample in family.samples:
            assert sample.labels["pipeline"] == "p1"
            if name != "binlake_metrics_collected_timestamp_seconds":
                assert sample.labels["table"] == "shop.orders"


def test_label_values_and_help_are_escaped() -> None:
    family = Family("binlake_x", "gauge", 'help with "quotes"\nand a newline \\ backslash',
                    samples=(Sample("", (("table", 'we"ird\\na\nme'),), 1.5),))
    parsed = _parsed(render([family]))
    assert parsed["binlake_x"].samples[0].labels["table"] == 'we"ird\\na\nme'
    assert parsed["binlake_x"].samples[0].value == 1.5


def test_histogram_buckets_are_cumulative() -> None:
    histogram = Histogram((0.1, 1.0))
    for value in (0.05, 0.5, 0.7, 3.0):
        histogram.observe(value)
    family = Family("binlake_batch_duration_seconds", "histogram", "h", "seconds",
                    tuple(histogram.samples((("pipeline", "p"),), 5.0)))
    parsed = _parsed(render([family]))["binlake_batch_duration_seconds"]
    buckets = {s.labels["le"]: s.value for s in parsed.samples if s.name.endswith("_bucket")}
    assert buckets == {"0.1": 1, "1.0": 3, "+Inf": 4}
    assert [s.value for s in parsed.samples if s.name.endswith("_count")] == [4]
    assert [s.value for s in parsed.samples if s.name.endswith("_sum")] == [pytest.approx(4.25)]


def test_batch_metrics_move_with_each_batch() -> None:
    metrics = BatchMetrics("p1")
    first = _parsed(render(metrics.families()))
    assert _value(first, "binlake_batches", "binlake_batches_total") == 0
    metrics.observe(seconds=0.4, tables=[("shop.orders", {"insert": 5, "delete": 1}, 0.2)], behind_bytes=0)
    metrics.observe(seconds=1.2, tables=[("shop.orders", {"update": 2}, 0.3)], behind_bytes=100)
    families = _parsed(render(metrics.families()))
    assert _value(families, "binlake_batches", "binlake_batches_total") == 2
    assert _value(families, "binlake_batch_duration_seconds", "binlake_batch_duration_seconds_count") == 2
    assert _value(families, "binlake_commit_duration_seconds", "binlake_commit_duration_seconds_sum",
                  table="shop.orders") == pytest.approx(0.5)
    for operation, count in (("insert", 5), ("update", 2), ("delete", 1)):
        assert _value(families, "binlake_process_rows_applied", "binlake_process_rows_applied_total",
                      operation=operation) == count
    assert _value(families, "binlake_follow_behind_bytes", "binlake_follow_behind_bytes") == 100


def test_figures_of_a_purged_runway_are_zero() -> None:
    figures = figures_of(_status(runway={"runway_seconds": -50.0, "purged": True}))
    assert figures.runway_seconds == 0.0
    assert isinstance(figures, TableFigures)


class _Context:
    """What the server asks of a pipeline context when no refresh is wanted."""

    class config:  # noqa: N801 - shaped like PipelineConfig
        pipeline = "p1"
        metrics = MetricsConfig(address="127.0.0.1:0")

        class source:  # noqa: N801
            network_timeout_seconds = 5


def test_server_serves_openmetrics_and_is_gone_after_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    refreshed = threading.Event()

    def refresh(self: MetricsServer) -> None:
        self._tables = table_families("p1", [figures_of(_status())], collected_at=2.0)
        refreshed.set()

    monkeypatch.setattr(MetricsServer, "refresh", refresh)
    server = MetricsServer(_Context(), host="127.0.0.1", port=0, refresh_seconds=1.0)  # type: ignore[arg-type]
    server.start()
    host, port = server.address
    try:
        assert refreshed.wait(10)
        server.batch_done(seconds=0.5, tables=[("shop.orders", {"insert": 1}, 0.1)], behind_bytes=0)
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
            assert response.headers["Content-Type"] == CONTENT_TYPE
            families = _parsed(response.read().decode())
        assert _value(families, "binlake_batches", "binlake_batches_total") == 1
        assert _value(families, "binlake_table_state", "binlake_table_state", state="healthy") == 1
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://{host}:{port}/other", timeout=10)
        assert missing.value.code == 404
    finally:
        server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5)


def test_classic_text_is_what_node_exporters_textfile_collector_parses() -> None:
    """node_exporter reads the older text format only (its issue 1988): there every sample is named after the
    `# TYPE` line before it (a histogram adds _bucket, _sum, _count), and there are no _created samples."""
    metrics = BatchMetrics("p1")
    metrics.observe(seconds=0.4, tables=[("shop.orders", {"insert": 5}, 0.2)], behind_bytes=0)
    families = [*table_families("p1", [figures_of(_status())], collected_at=3.0), *metrics.families()]
    text = render(families, classic=True)
    assert "# EOF" not in text and "# UNIT" not in text and "_created{" not in text
    typed = ""
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed, kind = line.split()[2:4]
            continue
        if line.startswith("#"):
            continue
        name = line.split("{")[0]
        allowed = {typed} | ({f"{typed}_bucket", f"{typed}_sum", f"{typed}_count"} if kind == "histogram" else set())
        assert name in allowed, line
    parsed = {family.name: family for family in prometheus_families(text)}
    assert parsed["binlake_rows_applied"].type == "counter"
    assert [s.value for s in parsed["binlake_rows_applied"].samples if s.labels["operation"] == "insert"] == [3]
    assert parsed["binlake_batch_duration_seconds"].type == "histogram"


def test_server_listens_on_ipv6_when_the_host_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MetricsServer, "refresh", lambda self: None)
    # The CI machine has an IPv6 loopback: a bind that fails here is a failure, not a skip.
    server = MetricsServer(_Context(), host="::1", port=0, refresh_seconds=1.0)  # type: ignore[arg-type]
    server.start()
    try:
        host, port = server.address
        with urllib.request.urlopen(f"http://[{host}]:{port}/metrics", timeout=10) as response:
            assert response.read().decode().endswith("# EOF\n")
    finally:
        server.stop()


def test_a_busy_port_is_a_config_error_that_names_the_key() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        class Busy(_Context):
            class config(_Context.config):  # noqa: N801
                metrics = MetricsConfig(address=f"127.0.0.1:{port}")

        with pytest.raises(ConfigError) as error:
            start_metrics_server(Busy())  # type: ignore[arg-type]
    assert error.value.key == "metrics.address" and str(port) in str(error.value)


def test_no_address_no_endpoint() -> None:
    class Off(_Context):
        class config(_Context.config):  # noqa: N801
            metrics = MetricsConfig()

    assert start_metrics_server(Off()) is None  # type: ignore[arg-type]
