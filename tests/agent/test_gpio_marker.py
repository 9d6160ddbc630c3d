"""The GPIO trial marker against a stand-in for libgpiod's v2 bindings (tests/agent/
gpiod_stand_in: this kernel has neither gpio-sim nor gpio-mockup, so no real line exists here).

What is tested: the line request (chip path, consumer, an output starting inactive), one rising
edge before each page fetch and one falling edge after it, in that order, the release at the end,
and the one-line errors for a missing chip, a bad line and missing bindings. What a run on a
Raspberry Pi adds: the bindings' real ioctls on /dev/gpiochipN, the permission to open it (the
gpio group), a line already taken by another consumer, and the electrical edge reaching the
meter's marker input (Mega pin D2, INT4), whose timing against the fetch only the board's sample
stream can show.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.errors import MarkerError
from agent.marker import GpioMarker, open_marker
from tests.agent.servers import AGENT, agent_server

HERE = Path(__file__).resolve().parent
STAND_IN = HERE / "gpiod_stand_in"
ABSENT = HERE / "gpiod_absent"


def _agent(*args: str, pythonpath: Path, log: Path | None = None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pythonpath), os.getcwd()])}
    if log is not None:
        env["H2IOT_GPIOD_LOG"] = str(log)
    return subprocess.run(
        [*AGENT, *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stand-in imported as `gpiod` in this process; yields its call log."""
    log = tmp_path / "gpiod.jsonl"
    monkeypatch.setenv("H2IOT_GPIOD_LOG", str(log))
    monkeypatch.syspath_prepend(str(STAND_IN))
    for name in ("gpiod", "gpiod.line"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield log
    for name in ("gpiod", "gpiod.line"):
        sys.modules.pop(name, None)


def test_a_fetch_raises_the_line_before_and_lowers_it_after_each_page(
    site: Path, tmp_path: Path
) -> None:
    log = tmp_path / "gpiod.jsonl"
    with agent_server(site, tmp_path) as server:
        result = _agent(
            "fetch", server.url, "--json", "--repeat", "2", "--marker", "gpio:gpiochip0:17",
            pythonpath=STAND_IN, log=log,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["ok"] for r in records] == [True, True]
    assert {r["marker"] for r in records} == {"gpio:/dev/gpiochip0:17"}
    edge = {"call": "set_value", "offset": 17}
    assert _calls(log) == [
        {"call": "request_lines", "path": "/dev/gpiochip0", "consumer": "h2iot-marker",
         "config": {"17": ["OUTPUT", "INACTIVE"]}},
        {**edge, "value": "ACTIVE"},
        {**edge, "value": "INACTIVE"},
        {**edge, "value": "ACTIVE"},
        {**edge, "value": "INACTIVE"},
        {"call": "release"},
    ]  # fmt: skip


def test_a_missing_chip_or_line_is_a_one_line_marker_error(stand_in: Path) -> None:
    with pytest.raises(MarkerError) as missing:
        open_marker("gpio:gpiochip9:17")
    assert str(missing.value) == (
        "--marker gpio:gpiochip9:17: [Errno 2] No such file or directory: '/dev/gpiochip9'"
    )
    with pytest.raises(MarkerError, match=r"^--marker gpio:gpiochip0:99: invalid offset$"):
        open_marker("gpio:gpiochip0:99")
    assert not stand_in.exists()  # nothing was requested


def test_a_full_chip_path_is_kept_and_describes_the_marker(stand_in: Path) -> None:
    marker = open_marker("gpio:/dev/gpiochip0:4")
    assert isinstance(marker, GpioMarker)
    assert marker.describe() == "gpio:/dev/gpiochip0:4"
    marker.raise_line()
    marker.close()
    assert [c["call"] for c in _calls(stand_in)] == ["request_lines", "set_value", "release"]


def test_gpio_marker_without_gpiod_is_a_one_line_error(site: Path, tmp_path: Path) -> None:
    with agent_server(site, tmp_path) as server:
        result = _agent("fetch", server.url, "--marker", "gpio:gpiochip0:17", pythonpath=ABSENT)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "h2iot-agent: error: --marker gpio: the gpiod module is not installed "
        "(pip install 'h2iot[gpio]')"
    )
