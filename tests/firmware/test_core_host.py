"""The portable firmware core's C unit tests, built with the host gcc and run under ASan/UBSan."""

from __future__ import annotations

import re
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
    # The harness's last line. A floor on the count (12,513 checks when this was written, most
    # from the golden vectors and the parser fuzz) catches a harness that ran nothing.
    summary = re.fullmatch(r"(\d+) checks, (\d+) failed", result.stdout.strip().splitlines()[-1])
    assert summary is not None, result.stdout
    checks, failed = int(summary[1]), int(summary[2])
    assert failed == 0, result.stderr
    assert checks >= 10_000, result.stdout
