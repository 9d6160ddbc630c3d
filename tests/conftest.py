"""Shared fixtures. Real components are required in CI (CI is set) and skipped elsewhere only
when missing, with the reason naming the component."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.ci_guard import pytest_configure  # noqa: F401  (in CI, a skipped test fails the run)


def require_tool(*names: str) -> None:
    """Skip the calling test when a tool is missing, except in CI where that is a failure."""
    missing = [name for name in names if shutil.which(name) is None]
    if not missing:
        return
    message = f"needs {', '.join(missing)} on PATH (install the Debian packages in .ci/apt/)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must provide every real component: {message}")
    pytest.skip(message)


def h2iot(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """The controller's command line in a process of its own, output captured as text (rich
    tables 200 columns wide, so their lines do not wrap)."""
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
