"""Real processes for the agent's tests: our server (`h2iot-agent serve`) and nghttpd, each on a
free loopback port, stopped (and checked) on exit."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENT = [sys.executable, "-m", "agent.cli"]
START_TIMEOUT_S = 20.0


@dataclass
class RunningServer:
    process: subprocess.Popen[str]
    port: int
    stderr_path: Path
    trial_log: Path | None
    listening: dict[str, Any] = field(default_factory=dict)  # `serve`'s listening line

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def trials(self) -> list[dict[str, object]]:
        assert self.trial_log is not None
        if not self.trial_log.exists():
            return []
        return [json.loads(line) for line in self.trial_log.read_text().splitlines() if line]

    def wait_for_trials(self, *trial_ids: str) -> dict[str, dict[str, object]]:
        """Every trial record so far, by id, once those of trial_ids are in: the server writes
        one when the trial's connection closes, which can be after its client has exited."""
        deadline = time.monotonic() + START_TIMEOUT_S  # a hang guard, not a timing assertion
        while not set(trial_ids) <= set(trials := {str(t["trial_id"]): t for t in self.trials()}):
            assert time.monotonic() < deadline, f"no record of {trial_ids} in {self.trial_log}"
            time.sleep(0.02)
        return trials


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {START_TIMEOUT_S} s")


def listening_line(stderr_path: Path, process: subprocess.Popen[str]) -> dict[str, Any]:
    """`serve`'s JSON `listening` line on its stderr, once it is listening."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in stderr_path.read_text().splitlines():
            if line.startswith("{") and json.loads(line).get("event") == "listening":
                return dict(json.loads(line))
        if process.poll() is not None:
            raise RuntimeError(f"serve exited {process.returncode}: {stderr_path.read_text()}")
        time.sleep(0.02)
    raise RuntimeError(f"serve not listening after {START_TIMEOUT_S:g} s")


_SERVERS = itertools.count(1)


@contextmanager
def agent_server(
    root: Path | None,
    tmp: Path,
    *extra: str,
    tls: bool = False,
    open_files_limit: int | None = None,
    verbose: bool = False,
) -> Iterator[RunningServer]:
    """`serve` on a free port; `root` None: no --root (a workload other than the page);
    `verbose`: its debug lines on stderr too.
    `open_files_limit`: the server process's RLIMIT_NOFILE (set by a shell that then execs
    the server, so the process and its pid are the server's)."""
    # Port 0: the server binds a free port and names it. A port picked here and bound by the
    # server later could be taken in between, and our readiness probe would find the taker.
    name = f"server-{next(_SERVERS)}"
    stderr_path = tmp / f"{name}.err"
    trial_log = tmp / f"{name}-trials.jsonl"
    args = [
        *AGENT,
        *(["--verbose"] if verbose else []),
        "serve",
        "--port",
        "0",
        "--trial-log",
        str(trial_log),
        *extra,
    ]
    if root is not None:
        args += ["--root", str(root)]
    if open_files_limit is not None:
        args = ["sh", "-c", f'ulimit -n {int(open_files_limit)} && exec "$@"', "sh", *args]
    with stderr_path.open("w") as err:
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        listening = listening_line(stderr_path, process)
        yield RunningServer(process, int(listening["port"]), stderr_path, trial_log, listening)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def nghttpd(root: Path, tmp: Path, *extra: str) -> Iterator[RunningServer]:
    port = free_port()
    stderr_path = tmp / f"nghttpd-{port}.err"
    args = ["nghttpd", "--no-tls", "-d", str(root), *extra, str(port)]
    with stderr_path.open("w") as err:
        process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=err, text=True, env={**os.environ}
        )
    server = RunningServer(process, port, stderr_path, None)
    try:
        wait_for_port(port, process)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_agent(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENT, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
