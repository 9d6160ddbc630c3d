"""Finding nghttp and nghttpd as an ordinary user: Debian installs nghttpd in /usr/sbin, which is
not on such a user's PATH, and a PATH entry the user may not read is passed over."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.engines.nghttp2.errors import ToolMissingError
from agent.engines.nghttp2.tools import SYSTEM_DIRS, find_tool
from tests.conftest import as_ordinary_user, require_tool

REPO = Path(__file__).resolve().parents[2]
# Run as nobody, the interpreter must be one nobody can reach (not a venv under /root); the
# lookup needs the standard library only.
SYSTEM_PYTHON = "/usr/bin/python3"


def _tool(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_path_comes_first_then_the_system_directories(tmp_path: Path) -> None:
    on_path = _tool(tmp_path / "bin", "nghttpd")
    in_sbin = _tool(tmp_path / "sbin", "nghttpd")
    sbin = (str(in_sbin.parent),)
    assert find_tool("nghttpd", str(on_path.parent), sbin) == str(on_path)
    assert find_tool("nghttpd", str(tmp_path / "empty"), sbin) == str(in_sbin)
    assert find_tool("nghttpd", "", sbin) == str(in_sbin)  # an empty PATH too


def test_what_is_not_an_executable_file_is_not_the_tool(tmp_path: Path) -> None:
    (tmp_path / "dir" / "nghttp").mkdir(parents=True)
    _tool(tmp_path / "plain", "nghttp").chmod(0o644)
    path = f"{tmp_path / 'dir'}:{tmp_path / 'plain'}"
    with pytest.raises(ToolMissingError) as missing:
        find_tool("nghttp", path, ())
    assert str(missing.value) == (
        "nghttp not found on PATH nor in /usr/local/sbin, /usr/sbin, /sbin: install the Debian "
        "package nghttp2-client (apt install nghttp2-client)"
    )


def test_the_installed_nghttpd_is_found_with_an_ordinary_users_path() -> None:
    require_tool("nghttpd")
    found = find_tool("nghttpd", "/usr/local/bin:/usr/bin:/bin")
    assert os.path.dirname(found) in {*SYSTEM_DIRS, "/usr/local/bin", "/usr/bin", "/bin"}
    assert os.access(found, os.X_OK)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user may search (pytest's tmp_path is its user's alone)."""
    directory = Path(tempfile.mkdtemp(prefix="h2iot-tools-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


def test_a_path_entry_the_user_may_not_read_is_passed_over(open_dir: Path) -> None:
    # As root, the directory is root's alone and the lookup runs as nobody.
    closed = open_dir / "closed"
    _tool(closed, "nghttp")
    closed.chmod(0o700 if os.geteuid() == 0 else 0)
    reachable = _tool(open_dir / "open", "nghttp")
    lookup = (
        "from agent.engines.nghttp2.tools import find_tool; "
        f"print(find_tool('nghttp', {f'{closed}:{reachable.parent}'!r}, ()))"
    )
    try:
        result = subprocess.run(
            as_ordinary_user([SYSTEM_PYTHON, "-c", lookup]),
            capture_output=True, text=True, check=False, timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
    finally:
        closed.chmod(stat.S_IRWXU)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(reachable)
