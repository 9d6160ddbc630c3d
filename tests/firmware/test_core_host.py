"""The portable firmware core's C unit tests, built with the host gcc and run under ASan/UBSan."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import require_tool

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"


def test_core_unit_tests_pass_on_the_host() -> None:
    require_tool("make", "gcc")
    result = subprocess.run(
        ["make", "-s", "-C", str(FIRMWARE), "test"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 failed" in result.stdout
