"""binlake's wheel built from a copy of this checkout, and a clean virtualenv with it installed as users get it.

The wheel is built offline and without build isolation (the venv's setuptools and `wheel`), from a copy of the
sources, so a stale `build/` folder cannot hide a mistake. The virtualenv has no system site packages and no
extras: only what `pip install binlake` brings from PyPI (through the local pip cache).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("cdc_lib", "assets", "orchestration")
NOT_SHIPPED = ("tests", "bench")


def copy_sources(target: Path) -> Path:
    """The files `pip wheel` reads (and the packages it must leave out), without caches or build leftovers."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    target.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, target / name)
    for package in SHIPPED + NOT_SHIPPED:
        shutil.copytree(ROOT / package, target / package, ignore=skip)
    return target


def build_wheel(source: Path, out: Path) -> Path:
    """`pip wheel` of `source` into `out`, offline; the one `binlake-*.whl` it wrote."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, (
        f"pip wheel failed (setuptools before 70.1 needs the `wheel` package: ./run setup installs the test "
        f"extra):\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    )
    [wheel] = out.glob("binlake-*.whl")
    return wheel


@dataclass(frozen=True)
class CleanVenv:
    root: Path
    #: Seconds `python -m venv` and `pip install <wheel>` took (reported by the tests that use it).
    install_seconds: float

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def pip_install(self, *requirements: str) -> None:
        installed = subprocess.run(
            [str(self.bin / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
            capture_output=True, text=True, timeout=1800, env=pip_environment(),
        )
        assert installed.returncode == 0, f"pip install {' '.join(requirements)} into {self.root} failed:\n" \
            f"{installed.stdout[-3000:]}\n{installed.stderr[-5000:]}"


def pip_environment() -> dict[str, str]:
    """The environment without this venv's traces (a PYTHONPATH into the checkout would hide a missing module)."""
    return {name: value for name, value in os.environ.items()
            if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")}


def clean_venv_with(wheel: Path, root: Path) -> CleanVenv:
    """A new virtualenv at `root` (no system site packages) with `wheel` installed, no extras."""
    started = time.monotonic()
    created = subprocess.run([sys.executable, "-m", "venv", str(root)], capture_output=True, text=True, timeout=300)
    assert created.returncode == 0, created.stdout + created.stderr
    venv = CleanVenv(root=root, install_seconds=0.0)
    venv.pip_install(str(wheel))
    return CleanVenv(root=root, install_seconds=time.monotonic() - started)
