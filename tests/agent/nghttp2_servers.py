"""`h2iot-agent serve --engine nghttp2` as a test process: its listening line (port, control
port, nghttpd's pid) and its trial log."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agent.servers import AGENT, listening_line


@dataclass
class NghttpdAgent:
    process: subprocess.Popen[str]
    listening: dict[str, Any]
    stderr_path: Path
    trial_log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listening['port']}/"

    @property
    def control(self) -> str:
        return f"127.0.0.1:{self.listening['control_port']}"

    def trials(self) -> list[dict[str, Any]]:
        if not self.trial_log.exists():
            return []
        return [json.loads(line) for line in self.trial_log.read_text().splitlines() if line]

    def stderr(self) -> str:
        return self.stderr_path.read_text()


@contextmanager
def nghttpd_agent(root: Path, tmp: Path, *extra: str) -> Iterator[NghttpdAgent]:
    stderr_path = tmp / "serve.err"
    trial_log = tmp / "trials.jsonl"
    args = [*AGENT, "serve", "--engine", "nghttp2", "--root", str(root), "--port", "0",
            "--trial-log", str(trial_log), *extra]  # fmt: skip
    with stderr_path.open("w") as err:
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        yield NghttpdAgent(process, listening_line(stderr_path, process), stderr_path, trial_log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
