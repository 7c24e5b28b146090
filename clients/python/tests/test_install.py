"""The package installs from the repository (pip, offline: Debian's setuptools and wheel), and an
installed package's pytest fixtures load by themselves (its pytest11 entry point): the example
test file passes in a project of its own, with no conftest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from memd.testing import find_binary

PACKAGE = Path(__file__).resolve().parents[1]


def test_installs_and_its_fixtures_load_by_themselves(tmp_path):
    source = tmp_path / "source"  # a copy: the build leaves build/ and *.egg-info beside the sources
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("tests", "examples", "__pycache__", "*.egg-info", "build"))
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", "--target", str(site), str(source)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    assert (site / "memd" / "py.typed").exists()

    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(PACKAGE / "examples" / "test_quickstart.py", project)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(site),
        "MEMD_BIN": find_binary(),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout
