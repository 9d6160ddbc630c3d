"""Skip rules for tests that need root and network namespaces: skip outside CI, fail in CI."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import require_tool


def require_root() -> None:
    """Skip the calling test unless it runs as root with `ip`, except in CI where that fails."""
    require_tool("ip", "sshd", "ssh-keygen")
    if os.geteuid() == 0 and shutil.which("ip"):
        return
    message = "needs root to create network namespaces"
    if os.environ.get("CI"):
        pytest.fail(f"CI runs as root and must run this test: {message}")
    pytest.skip(message)
