"""What a person sees: dagster-webserver on 127.0.0.1, the asset graph and a table's checks in headless Chromium.

Needs Debian's `chromium` (/usr/bin/chromium) and the `playwright` Python package; the test fails, never
skips, when either is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from cdc_lib.dev.local_mariadb import free_port
from tests.conftest import CDC_PASSWORD
from tests.dagster.cli_load import delta_versions, load_with_the_cli_path
from tests.dagster.conftest import Shop, freshness_checks_job
from tests.dagster.daemon import first_ticks, launch_freshness

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
CHECKS = ["consistency", "lag", "binlog_runway", "reconciliation", "freshness_check"]
# The instance config docs/dagster.md recommends: one step per pool, so one runner per pipeline.
DAGSTER_YAML = "concurrency:\n  pools:\n    default_limit: 1\ntelemetry:\n  enabled: false\n"


@pytest.fixture
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def run_the_pipeline_once(shop: Shop) -> None:
    """Snapshot, one micro-batch after a change, and a reconciliation, recorded in the webserver's instance."""
    defs = shop.definitions()
    with dg.DagsterInstance.get() as instance:
        assert instance.event_log_storage.get_pool_config().default_pool_limit == 1
        tags = {
            "dagster/asset_partition_range_start": shop.tables[0],
            "dagster/asset_partition_range_end": shop.tables[-1],
        }
        assert defs.resolve_job_def(shop.names.snapshot_job).execute_in_process(instance=instance, tags=tags).success
        shop.sql("UPDATE orders SET status = 'shipped' WHERE id <= 10")
        assert defs.resolve_job_def(shop.names.sync_job).execute_in_process(instance=instance).success
        assert defs.resolve_job_def(shop.names.reconcile_job).execute_in_process(instance=instance).success
        assert freshness_checks_job(defs).execute_in_process(instance=instance).success


def first_run_of_run_dagster(shop: Shop) -> dict[str, int]:
    """What `./run dagster` leads to: the CLI path loads the shop, then a fresh instance's first micro-batch run,
    the sensors' ticks (the freshness checks they request) and a reconciliation. Returns each table's Delta
    version."""
    pipeline = load_with_the_cli_path(shop)
    versions = delta_versions(shop, pipeline)
    defs = shop.definitions()
    with dg.DagsterInstance.get() as instance:
        assert defs.resolve_job_def(shop.names.sync_job).execute_in_process(instance=instance).success
        ticks = first_ticks(shop, defs, instance)
        assert not ticks[shop.names.missing_snapshot_sensor].run_requests
        [request] = ticks[shop.names.freshness_sensor].run_requests
        assert launch_freshness(defs, instance, request).success
        assert defs.resolve_job_def(shop.names.reconcile_job).execute_in_process(instance=instance).success
    return versions


@contextmanager
def running_webserver(shop: Shop, dagster_home: Path, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    environment = {
        **os.environ,
        "BINLAKE_CONFIG": str(shop.config_path),
        "BINLAKE_TEST_PASSWORD": CDC_PASSWORD,
        "DAGSTER_HOME": str(dagster_home),
    }
    log = open(tmp_path / "webserver.log", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "dagster_webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/server_info", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = (tmp_path / "webserver.log").read_text()
                    raise AssertionError(f"dagster-webserver did not start:\n{output}") from None
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


@pytest.fixture
def webserver(shop: Shop, dagster_home: Path, tmp_path: Path) -> Iterator[str]:
    run_the_pipeline_once(shop)
    with running_webserver(shop, dagster_home, tmp_path) as base:
        yield base


def test_the_ui_shows_every_table_asset_and_its_checks(shop: Shop, webserver: str, tmp_path: Path) -> None:
    assert CHROMIUM.exists(), "install Debian's chromium: apt-get install -y chromium chromium-driver"
    from playwright.sync_api import sync_playwright

    pipeline, database = shop.config.pipeline, shop.database
    tables = [table.split(".", 1)[1] for table in shop.tables]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = new_page(browser)

            # The asset graph of the source database's group: MySQL tables → snapshot → Delta tables.
            page.goto(f"{webserver}/locations/binlake/asset-groups/{database}", wait_until="networkidle")
            for table in tables:
                nodes = page.get_by_text(table, exact=True)
                nodes.first.wait_for(timeout=60_000)
                assert nodes.count() >= 2, f"{table}: expected its MySQL source and its Delta copy in the graph"
            page.get_by_text("snapshot", exact=True).first.wait_for()
            # The nodes fill in their latest event and check counts after the graph draws.
            page.wait_for_function("() => !/Loading(\\.\\.\\.|\u2026)/.test(document.body.innerText)", timeout=60_000)
            page.wait_for_timeout(1_000)
            page.screenshot(path=str(tmp_path / "asset_graph.png"), full_page=True)

            # The catalog lists every key: the Delta copies and their external MySQL sources.
            page.goto(f"{webserver}/assets", wait_until="networkidle")
            keys = [f"{kind} / {pipeline} / {database} / {table}" for table in tables for kind in ("binlake", "mysql")]
            page.wait_for_function(
                "keys => keys.every(key => document.body.innerText.includes(key))", arg=keys, timeout=60_000
            )

            # Each table's page lists its five checks; the first one is kept as a picture.
            for table in tables:
                page.goto(f"{webserver}/assets/binlake/{pipeline}/{database}/{table}?view=checks")
                page.get_by_text("Checks (5)").wait_for(timeout=30_000)
                page.wait_for_function(
                    "names => names.every(name => document.body.innerText.split('\\n').includes(name))",
                    arg=CHECKS, timeout=30_000,
                )
                if table == "orders":
                    page.get_by_text("reconciliation", exact=True).first.click()
                    page.wait_for_timeout(1_500)
                    page.screenshot(path=str(tmp_path / "orders_checks.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "asset_graph.png").stat().st_size > 10_000
    assert (tmp_path / "orders_checks.png").stat().st_size > 10_000


def new_page(browser: Any) -> Any:
    """A page that closes Dagster's "Join the Dagster community" dialog whenever it shows up (it may come late,
    and it blocks every click while open)."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    skip = page.get_by_role("button", name="Skip")
    page.add_locator_handler(skip, lambda: skip.click())
    return page


def check_statuses(text: str) -> dict[str, str]:
    """Check name → status in a Checks tab's list (each entry reads: name, name, status)."""
    lines = text.split("\n")
    first = lines.index("Execute all") + 1
    return {lines[first + 3 * index]: lines[first + 3 * index + 2] for index in range(len(CHECKS))}


def test_the_first_run_shows_cli_loaded_tables_materialized_and_no_failed_check(
    shop: Shop, dagster_home: Path, tmp_path: Path
) -> None:
    assert CHROMIUM.exists(), "install Debian's chromium: apt-get install -y chromium chromium-driver"
    from playwright.sync_api import sync_playwright

    versions = first_run_of_run_dagster(shop)
    pipeline, database = shop.config.pipeline, shop.database
    with running_webserver(shop, dagster_home, tmp_path) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = new_page(browser)
            for table in shop.tables:
                name = table.split(".", 1)[1]
                # Overview: materialized (not "Never materialized"), its Delta version in the metadata.
                page.goto(f"{base}/assets/binlake/{pipeline}/{database}/{name}", wait_until="networkidle")
                page.get_by_text("delta_version", exact=True).first.wait_for(timeout=60_000)
                page.wait_for_timeout(1_000)
                text = page.inner_text("body")
                assert "Latest materialization" in text and "Never materialized" not in text, text
                row = page.locator("tr", has=page.get_by_text("delta_version", exact=True)).first
                assert row.locator("td").all_inner_texts()[-1].strip() == str(versions[table])
                page.screenshot(path=str(tmp_path / f"{name}_overview.png"), full_page=True)

                # Checks tab: all five evaluated, none failed.
                page.goto(f"{base}/assets/binlake/{pipeline}/{database}/{name}?view=checks", wait_until="networkidle")
                page.get_by_text("Checks (5)").wait_for(timeout=30_000)
                page.wait_for_function(
                    "() => (document.body.innerText.match(/\\nSucceeded\\n/g) || []).length >= 5", timeout=30_000
                )
                text = page.inner_text("body")
                assert check_statuses(text) == {check: "Succeeded" for check in CHECKS}, text
                page.screenshot(path=str(tmp_path / f"{name}_checks.png"), full_page=True)

            # The snapshot asset: every partition (table) materialized, none missing.
            page.goto(f"{base}/assets/binlake/{pipeline}/snapshot?view=partitions", wait_until="networkidle")
            page.get_by_text(f"Materialized ({len(shop.tables)})").wait_for(timeout=30_000)
            assert "Missing (0)" in page.inner_text("body")
            page.screenshot(path=str(tmp_path / "snapshot_partitions.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "orders_checks.png").stat().st_size > 10_000
