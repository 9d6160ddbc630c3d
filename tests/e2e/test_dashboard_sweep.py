"""The live dashboard as users see it: `h2iot sweep` with the dashboard on, in a real terminal
(a pseudo-terminal), on local nodes with the virtual meter. Every other end-to-end test passes
--no-dashboard; this one reads what the terminal showed while the sweep ran and when it ended."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local.toml"
SHORT = [
    "--set", "workload.total_bytes=300000",
    "--set", "run.idle_baseline_s=1",
    "--set", "run.repetitions=1",
    "--set", "sweep.initial_window_size=[4096, 65535]",
]  # fmt: skip
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _in_a_terminal(*argv: str, timeout_s: float = 300) -> tuple[int, str]:
    """Run argv with a pty as its terminal (stdin, stdout, stderr); exit status and everything
    it wrote, escape sequences included."""
    master, slave = os.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "60"}
    for name in ("NO_COLOR", "CI", "FORCE_COLOR", "TERM_PROGRAM"):
        env.pop(name, None)  # rich treats CI and the like as "not a live terminal"
    process = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout_s  # a hang guard, not a timing assertion
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer has gone
                    break
                if not chunk:
                    break
                out += chunk
            elif process.poll() is not None:
                break
        status = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    return status, out.decode(errors="replace")


def test_a_sweep_with_the_live_dashboard_in_a_terminal(tmp_path: Path) -> None:
    status, raw = _in_a_terminal(
        sys.executable, "-m", "controller.cli", "sweep", str(CONFIG), "--out", str(tmp_path),
        *SHORT,
    )  # fmt: skip
    text = _ESCAPE.sub("", raw)
    assert status == 0, text[-3000:]
    # A live view: rich hid the cursor and redrew the panel in place, frame after frame.
    assert "\x1b[?25l" in raw and "\x1b[?25h" in raw
    assert "\x1b[2K" in raw or "\x1b[1A" in raw
    frames = text.count("h2iot sweep ")
    assert frames >= 3, text[-3000:]
    # It followed the sweep: each count of finished trials, the trial running, the meter.
    assert "h2iot sweep 0/2 trials" in text
    assert "h2iot sweep 1/2 trials" in text
    assert re.search(r"trial\s+t[12]: initial_window_size=(4096|65535), repetition 1", text)
    assert re.search(r"meter\s+virtual\b.*samples/s, CRC errors 0", text)
    assert re.search(r"power\s+\S+ \d+ mW", text)
    # The last frame, left on screen when the sweep ended: both points, one result each.
    last = text[text.rindex("h2iot sweep ") :]
    assert last.startswith("h2iot sweep 2/2 trials, 0 failed attempts")
    for window in ("4096", "65535"):
        assert re.search(rf"│\s+{window} │\s+1 │\s+0 │", last), last
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert f"report: h2iot report {run}" in text
