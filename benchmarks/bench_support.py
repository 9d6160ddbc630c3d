"""What the benchmarks share: pinned child processes, stopping them, a process's CPU time from
the scheduler, free ports, CSV output, a median's bootstrap interval. Imported by the scripts
beside it (run as `python benchmarks/NAME.py`, this directory is first on sys.path)."""

from __future__ import annotations

import argparse
import csv
import os
import random
import signal
import socket
import statistics
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
REPO = Path(__file__).resolve().parent.parent


def add_server_bench_options(parser: argparse.ArgumentParser) -> None:
    """The options every server-against-server benchmark takes: the site served, where results
    go, and the two cores the server and the clients are pinned to."""
    parser.add_argument("--site", type=Path, default=REPO / "data" / "site")
    parser.add_argument("--out", type=Path, help="results directory (default data/bench/...)")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)


@contextmanager
def pinned(core: int) -> Iterator[None]:
    """Children started inside inherit the affinity (no preexec_fn: it is unsafe with threads)."""
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, previous)


@contextmanager
def terminated(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """SIGTERM the process on leaving (it drains), SIGKILL it after 40 s."""
    try:
        yield
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_cpu_s(pid: int) -> float:
    """CPU time of a running process: the scheduler's nanosecond count summed over its threads
    (/proc/PID/task/*/schedstat), else utime + stime in clock ticks from /proc/PID/stat."""
    tasks = Path(f"/proc/{pid}/task").glob("*/schedstat")
    try:
        return sum(int(path.read_text().split()[0]) for path in tasks) / 1e9
    except (OSError, ValueError, IndexError):
        return sum(process_user_sys_s(pid))


def process_user_sys_s(pid: int) -> tuple[float, float]:
    """A running process's user and system CPU time, every thread's (/proc/PID/stat utime,
    stime: clock ticks, so read them around work of many ticks)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    # Fields 14 and 15 of proc(5), counted after the comm field closes.
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def write_csv(path: Path, records: Sequence[object]) -> None:
    """Dataclass records as CSV rows, their fields as the header; nothing for no records."""
    dicts = [asdict(record) for record in records]  # type: ignore[call-overload]
    if not dicts:
        return
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(dicts[0]))
        writer.writeheader()
        writer.writerows(dicts)


# The --set options of a sweep benchmark's profiles: `local` as the config says; `rpi3b` both
# nodes emulating a Pi 3B (configs/local-rpi3b.toml's device profile, its FastEthernet link and
# the relay's 0.5 ms; needs root).
PROFILES: dict[str, tuple[str, ...]] = {
    "local": (),
    "rpi3b": (
        "nodes.client.device=rpi3b",
        "nodes.server.device=rpi3b",
        "meter.channels.server=A1",
        "link.rate_mbit=100",
        "link.delay_ms=0.5",
        'link.delay_method="relay"',
    ),
}


def median_interval(values: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """A 90 % bootstrap interval of the median of `values` (2,000 resamples, seeded: the same
    measurements give the same interval)."""
    resample = random.Random(seed)
    medians = sorted(
        statistics.median(resample.choices(values, k=len(values))) for _ in range(2000)
    )
    return medians[100], medians[1899]
