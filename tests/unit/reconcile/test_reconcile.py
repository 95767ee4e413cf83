"""`cdc_lib.reconcile.reconcile` without a server: the verdict and how a person reads it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cdc_lib.cli import unexpected_remedy
from cdc_lib.display.report import STATUS_LEGEND, format_reconciliation, format_status, verdict_text
from cdc_lib.reconcile.reconcile import ChunkMismatch, ReconciliationReport
from cdc_lib.reconcile.rows import compare_rows
from cdc_lib.state.offset_store import LocalOffsetStore
from cdc_lib.state.reconcile_verdicts import VERDICTS_DOCUMENT, Verdict, read_verdicts, record_verdict


def _report(**changes: object) -> ReconciliationReport:
    fields: dict[str, object] = dict(
        table="shop.t", mode="key_range", chunks=4, columns=3, source_rows=10, delta_rows=12,
        mismatches=(ChunkMismatch(chunk=0, where="id < 5", source_rows=4, delta_rows=6),), schema_differences=(),
        confirmed=True, rechecked=False, seconds=0.1,
        drift=compare_rows([0], {("1",): 1, ("2",): 2}, {("1",): [1, 1, 1], ("2",): [2]}),
    )
    fields.update(changes)
    return ReconciliationReport(**fields)  # type: ignore[arg-type]


def test_duplicated_keys_are_drift_in_the_text_and_the_verdict() -> None:
    report = _report()
    lines = format_reconciliation(report)
    assert lines[0] == "DRIFT shop.t: source 10 rows, Delta 12 rows, missing 0, extra 0, differing 0, duplicated 1"
    assert "  duplicated in Delta (one key, several rows): 1 (3 rows)" in lines
    verdict = report.to_verdict()
    assert (verdict.verdict, verdict.drifting_rows, verdict.duplicated_keys, verdict.mismatched_chunks) == (
        "drift", 1, 1, 1
    )
    assert report.to_json()["verdict"] == "drift"
    assert _report(confirmed=False).verdict == "unconfirmed"
    assert _report(mismatches=(), delta_rows=10, drift=None).verdict == "match"


def test_verdicts_are_one_document_that_racing_reconciles_both_land_in(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    assert read_verdicts(store, "p") == {}

    def verdict(kind: str) -> Verdict:
        return Verdict(at="2026-11-27T08:00:00+00:00", verdict=kind, source_rows=1, delta_rows=1,  # type: ignore[arg-type]
                       mismatched_chunks=0)

    threads = [
        threading.Thread(target=record_verdict, args=(store, "p", f"db.t{index}", verdict("match")))
        for index in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert record_verdict(store, "p", "db.t3", verdict("drift"))
    verdicts = read_verdicts(store, "p")
    assert sorted(verdicts) == [f"db.t{index}" for index in range(8)]
    assert verdicts["db.t3"].verdict == "drift" and verdicts["db.t0"].verdict == "match"
    document, _ = store.read_document("p", VERDICTS_DOCUMENT)
    assert document is not None and document["format"] == 1


def test_a_verdict_the_store_refuses_is_logged_not_raised(tmp_path: Path) -> None:
    (tmp_path / "p").write_text("a file where the pipeline's folder should be")
    verdict = Verdict(at="x", verdict="match", source_rows=0, delta_rows=0, mismatched_chunks=0)
    assert record_verdict(LocalOffsetStore(tmp_path), "p", "db.t", verdict) is False


def test_status_shows_the_last_verdict_in_a_few_words() -> None:
    assert verdict_text(None) == "never"
    base = {"at": "2026-11-27T08:01:02+00:00", "source_rows": 5, "delta_rows": 6, "mismatched_chunks": 2}
    assert verdict_text({**base, "verdict": "match"}) == "match 2026-11-27 08:01"
    assert verdict_text({**base, "verdict": "drift", "drifting_rows": 3, "duplicated_keys": 1}) == (
        "DRIFT (3 rows, 1 duplicated keys) 2026-11-27 08:01"
    )
    assert verdict_text({**base, "verdict": "unconfirmed", "drifting_rows": None}) == (
        "UNCONFIRMED (2 chunks) 2026-11-27 08:01"
    )


def test_an_unexpected_failure_of_a_read_only_command_says_nothing_was_changed() -> None:
    assert unexpected_remedy("reconcile") == "binlake reconcile changes no Delta table and no offset"
    assert "batch" not in unexpected_remedy("reconcile") and "batch" not in unexpected_remedy("status")
    assert unexpected_remedy("sync") == "nothing past the last committed batch was applied"


def test_the_cli_prints_the_remedy_of_the_command_that_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cdc_lib import cli

    def fail(*_: object) -> None:
        raise RuntimeError("DOUBLE value is out of range")

    monkeypatch.setattr(cli, "configure_logging", lambda *_, **__: None)
    monkeypatch.setattr(cli, "load_config", fail)
    assert cli.main(["reconcile"]) == 2
    error = capsys.readouterr().err
    assert "unexpected RuntimeError: DOUBLE value is out of range — remedy: binlake reconcile changes no" in error
    assert "committed batch" not in error


def test_the_status_table_says_past_snapshot_and_shows_the_verdict() -> None:
    from cdc_lib.status.table_status import TableStatus

    status = TableStatus(
        table="shop.t", snapshotted=True, consistent=True, position="bin.000002:4", high_watermark="-",
        delta_version=1, lag_bytes=0, lag_events=0, lag_seconds=0.0, error=None,
        last_reconcile={"at": "2026-11-27T08:01:02+00:00", "verdict": "drift", "source_rows": 5, "delta_rows": 6,
                        "mismatched_chunks": 1, "drifting_rows": 1, "duplicated_keys": 1},
    )
    lines = format_status([status, TableStatus.not_snapshotted("shop.u")]).splitlines()
    assert [cell.strip() for cell in lines[0].split("  ") if cell.strip()][:3] == [
        "table", "past snapshot", "last reconcile"
    ]
    assert "yes" in lines[1] and "DRIFT (1 rows, 1 duplicated keys) 2026-11-27 08:01" in lines[1]
    assert "not snapshotted  never" in lines[2]
    assert lines[-1] == STATUS_LEGEND and "compares no data" in STATUS_LEGEND


def test_a_verdict_document_of_a_newer_format_is_neither_read_nor_replaced(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    entry = {"at": "x", "verdict": "match", "source_rows": 0, "delta_rows": 0, "mismatched_chunks": 0}
    store.write_document("p", VERDICTS_DOCUMENT, {"format": 2, "tables": {"db.t": entry}}, None)
    verdict = Verdict(at="y", verdict="drift", source_rows=0, delta_rows=1, mismatched_chunks=1)
    assert read_verdicts(store, "p") == {} and record_verdict(store, "p", "db.t", verdict) is False
    document, _ = store.read_document("p", VERDICTS_DOCUMENT)
    assert document is not None and document["format"] == 2
