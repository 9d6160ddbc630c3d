"""With CI set, a run whose tests skip fails; without it, a skip is only reported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[1]

SKIPPING = """
import pytest

from tests.conftest import require_tool

def test_passes():
    pass

def test_skips():
    pytest.skip("no such tool here")

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False
"""


def _pytest(tmp_path: Path, source: str, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_tiny.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ci_guard", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_in_ci_a_skip_fails_the_run_and_is_named_in_one_line(tmp_path: Path) -> None:
    result = _pytest(tmp_path, SKIPPING, "true")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("CI=true fails on skips")]
    assert line == (
        "CI=true fails on skips: 1 skipped: test_tiny.py::test_skips (no such tool here)"
    )


def test_a_module_skipped_at_collection_fails_too(tmp_path: Path) -> None:
    source = 'import pytest\npytest.importorskip("h2iot_no_such_module")\n' + SKIPPING
    result = _pytest(tmp_path, source, "true")
    assert result.returncode != 0, result.stdout
    assert "CI=true fails on skips: 1 skipped: test_tiny.py (" in result.stdout


def test_outside_ci_a_skip_is_only_reported(tmp_path: Path) -> None:
    result = _pytest(tmp_path, SKIPPING, None)
    assert result.returncode == pytest.ExitCode.OK, result.stdout
    assert "1 passed, 1 skipped, 1 xfailed" in result.stdout
    assert "CI=true fails" not in result.stdout


def test_in_ci_a_clean_run_passes(tmp_path: Path) -> None:
    result = _pytest(tmp_path, "def test_passes():\n    pass\n", "true")
    assert result.returncode == pytest.ExitCode.OK, result.stdout


ROOT_SKIPS = """
import pytest

from tests.conftest import require_tool

@pytest.mark.root
def test_marked():
    pytest.skip("needs root: namespaces")

def test_unmarked():
    pytest.skip("needs root: namespaces")

@pytest.mark.root
def test_marked_other_reason():
    pytest.skip("no such tool here")
"""


def test_as_an_ordinary_user_only_root_marked_skips_for_root_are_accepted(tmp_path: Path) -> None:
    # In a user namespace of its own the process is not root (euid 65534) yet keeps reaching
    # this interpreter, wherever it is installed.
    require_tool("unshare")
    (tmp_path / "test_tiny.py").write_text(ROOT_SKIPS)
    # A module skipped at collection has no markers: never accepted.
    (tmp_path / "test_gone.py").write_text('import pytest\npytest.importorskip("h2iot_none")\n')
    argv = [sys.executable, "-m", "pytest", "-p", "tests.ci_guard", "-p", "no:cacheprovider",
            "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)]  # fmt: skip
    runs = {}
    for user, prefix in (("root", []), ("ordinary", ["unshare", "--user"])):
        runs[user] = subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
            env={**os.environ, "CI": "true"},
        )  # fmt: skip
    if os.geteuid() == 0:
        assert "CI=true fails on skips: 4 skipped" in runs["root"].stdout
    ordinary = runs["ordinary"]
    assert ordinary.returncode == pytest.ExitCode.TESTS_FAILED, ordinary.stdout
    (line,) = [x for x in ordinary.stdout.splitlines() if x.startswith("CI=true fails on skips")]
    skipped = line.split(": ", 2)[2].split("; ")
    assert line.startswith("CI=true fails on skips: 3 skipped: ")
    assert skipped[0].startswith("test_gone.py (could not import 'h2iot_none'")
    assert skipped[1:] == [
        "test_tiny.py::test_unmarked (needs root: namespaces)",
        "test_tiny.py::test_marked_other_reason (no such tool here)",
    ]
