"""`h2iot local-fetch`: the interim quick start. Runs a server agent and a client agent as local
processes and sweeps SETTINGS_INITIAL_WINDOW_SIZE, showing a live table of the page fetches.

It talks to the agents only through their command line and JSON lines, like the sweep engine
that will replace it. Results land in data/runs/local-fetch-<time>/ (fetches.jsonl from the
client, trials.jsonl from the server).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from controller.errors import ConfigError, ControllerError, DeviceError

STUDY_WINDOWS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65535)
AGENT = (sys.executable, "-m", "agent.cli")


@dataclass
class WindowResult:
    window: int
    response_s: list[float] = field(default_factory=list)
    client_cpu_s: list[float] = field(default_factory=list)
    server_cpu_s: list[float] = field(default_factory=list)
    failures: int = 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "local-fetch",
        help="sweep the window size with local agents (interim quick start)",
        description=__doc__,
    )
    parser.add_argument(
        "--windows",
        default=",".join(map(str, STUDY_WINDOWS)),
        help="comma-separated SETTINGS_INITIAL_WINDOW_SIZE values in bytes",
    )
    parser.add_argument("--repeat", type=int, default=5, help="page fetches per window")
    parser.add_argument("--site", type=Path, default=Path("data/site"))
    parser.add_argument("--out", type=Path, default=Path("data/runs"))
    parser.set_defaults(handler=_run)


def _windows(text: str) -> list[int]:
    try:
        windows = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--windows {text!r}: expected comma-separated integers") from None
    if not windows or any(not 0 < w < 2**31 for w in windows):
        raise ConfigError(f"--windows {text!r}: each window must be in 1..2147483647")
    return windows


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise DeviceError(f"server agent exited with status {server.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise DeviceError(f"server agent is not listening on port {port} after 20 s")


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values) * 1000:.1f}" if values else "-"


def _table(results: list[WindowResult]) -> Table:
    table = Table(title="page fetches by SETTINGS_INITIAL_WINDOW_SIZE (means)")
    for heading in ("window B", "n", "response ms", "client CPU ms", "server CPU ms", "failed"):
        table.add_column(heading, justify="right")
    for result in results:
        table.add_row(
            str(result.window),
            str(len(result.response_s)),
            _mean(result.response_s),
            _mean(result.client_cpu_s),
            _mean(result.server_cpu_s),
            str(result.failures),
        )
    return table


def _run(args: argparse.Namespace) -> int:
    console = Console()
    try:
        return _sweep(args, console)
    except ControllerError as exc:
        console.print(f"h2iot: error: {exc}", style="red", highlight=False)
        return exc.exit_status


def _sweep(args: argparse.Namespace, console: Console) -> int:
    windows = _windows(args.windows)
    if args.repeat < 1:
        raise ConfigError(f"--repeat {args.repeat} must be at least 1")
    if not (args.site / "manifest.json").exists():
        console.print(f"building the test page in {args.site} ...")
        subprocess.run([*AGENT, "site", "build", str(args.site)], check=True)
    run_dir = args.out / time.strftime("local-fetch-%Y%m%dT%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    server = subprocess.Popen(
        [
            *AGENT,
            "serve",
            "--root",
            str(args.site),
            "--port",
            str(port),
            "--trial-log",
            str(run_dir / "trials.jsonl"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=(run_dir / "server.log").open("wb"),
    )
    results = [WindowResult(window) for window in windows]
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    task = progress.add_task("page fetches", total=len(windows) * args.repeat)
    try:
        _wait_listening(port, server)
        with Live(Group(progress, _table(results)), console=console, refresh_per_second=4) as live:
            for result in results:
                _fetch_window(port, result, args.repeat, run_dir)
                _attach_server_cpu(run_dir, results)
                progress.advance(task, args.repeat)
                live.update(Group(progress, _table(results)))
    finally:
        server.terminate()
        server.wait(timeout=40)
    console.print(_table(results))
    console.print(f"records: {run_dir}/fetches.jsonl (client), {run_dir}/trials.jsonl (server)")
    return 1 if any(r.failures for r in results) else 0


def _fetch_window(port: int, result: WindowResult, repeat: int, run_dir: Path) -> None:
    completed = subprocess.run(
        [
            *AGENT,
            "fetch",
            f"http://127.0.0.1:{port}/",
            "--json",
            "--repeat",
            str(repeat),
            "--initial-window-size",
            str(result.window),
            "--trial-id",
            f"w{result.window}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise DeviceError(f"client agent failed: {completed.stderr.strip() or 'no output'}")
    with (run_dir / "fetches.jsonl").open("a") as out:
        out.write("\n".join(lines) + "\n")
    for line in lines:
        record = json.loads(line)
        if record["ok"]:
            result.response_s.append(record["response_s"])
            result.client_cpu_s.append(record["cpu_s"])
        else:
            result.failures += 1


def _attach_server_cpu(run_dir: Path, results: list[WindowResult]) -> None:
    """Server CPU per window from the server agent's trial log (read again after each window)."""
    by_window = {f"w{r.window}": r for r in results}
    log = run_dir / "trials.jsonl"
    if not log.exists():
        return
    for result in results:
        result.server_cpu_s.clear()
    for line in log.read_text().splitlines():
        trial = json.loads(line)
        owner = by_window.get(trial["trial_id"].rsplit("-", 1)[0])
        if owner is not None and trial["ok"]:
            owner.server_cpu_s.append(trial["cpu_s"])
