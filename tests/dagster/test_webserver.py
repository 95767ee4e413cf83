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
from pathlib import Path

import dagster as dg
import pytest

from cdc_lib.dev.local_mariadb import free_port
from tests.conftest import CDC_PASSWORD
from tests.dagster.conftest import Shop, freshness_checks_job

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


@pytest.fixture
def webserver(shop: Shop, dagster_home: Path, tmp_path: Path) -> Iterator[str]:
    run_the_pipeline_once(shop)
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


def test_the_ui_shows_every_table_asset_and_its_checks(shop: Shop, webserver: str, tmp_path: Path) -> None:
    assert CHROMIUM.exists(), "install Debian's chromium: apt-get install -y chromium chromium-driver"
    from playwright.sync_api import sync_playwright

    pipeline, database = shop.config.pipeline, shop.database
    tables = [table.split(".", 1)[1] for table in shop.tables]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})

            # The asset graph of the source database's group: MySQL tables → snapshot → Delta tables.
            page.goto(f"{webserver}/locations/binlake/asset-groups/{database}", wait_until="networkidle")
            skip = page.get_by_role("button", name="Skip")
            if skip.count():
                skip.click()
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
