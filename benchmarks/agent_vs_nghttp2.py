"""Benchmark: the agent's HTTP/2 client and server against nghttp2's tools, window by window.

For every window of the study's sweep, page fetches of the default site on loopback, three
measurements per run, in alternating order (the machine may be shared, so runs interleave and
the table shows medians of paired ratios):

1. `h2load` -> `nghttpd`: nghttp2's client CPU/wall (for 2) and nghttpd's CPU/wall (for 3).
2. our client (`h2iot-agent fetch`) -> `nghttpd`: compared with 1 on the client side.
3. `h2load` -> our server (`h2iot-agent serve`): compared with 1 on the server side.

Servers run pinned to one core, clients to the other (sched_setaffinity). Client CPU is the
whole process's (getrusage of the reaped child, startup included); server CPU is the scheduler's
count for the server process (/proc/PID/task/*/schedstat, in ns) before and after the client's
run. Wall time is the client process's.

nghttp2's tools take windows as bits (2^N - 1 bytes): each window maps to the nearest 2^N - 1,
and our client gets exactly that many bytes for both its stream window (SETTINGS) and its
connection window, as `-w N -W N` gives nghttp2 (the study passed the same N to both).

Run from the repository root with the project's venv:
    .venv/bin/python benchmarks/agent_vs_nghttp2.py [--fetches 68] [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench_support import free_port, pinned, process_cpu_s, terminated, write_csv

from agent.site import DEFAULT_TOTAL_BYTES, build_site, load_manifest

REPO = Path(__file__).resolve().parent.parent

STUDY_WINDOWS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65535)
QUICK_WINDOWS = (256, 4096, 65535)
START_TIMEOUT_S = 20.0


def nghttp2_bits(window: int) -> int:
    """The N of `-w N` whose 2^N - 1 bytes is nearest to `window` (256 -> 8, i.e. 255)."""
    return max(1, min(30, round(math.log2(window + 1))))


@dataclass(frozen=True)
class Setup:
    site: Path
    urls_path: tuple[str, ...]
    page_bytes: int
    fetches: int
    server_core: int
    client_core: int
    timeout_s: float


@dataclass(frozen=True)
class Measurement:
    """One client process run against one server: what each side spent."""

    run: int
    window: int
    bits: int
    case: str  # "nghttp2" (h2load -> nghttpd), "our-client", "our-server"
    client_cpu_user_s: float
    client_cpu_sys_s: float
    client_wall_s: float
    server_cpu_s: float
    fetch_cpu_s: float | None  # our client only: its per-fetch probes summed (no startup)

    @property
    def client_cpu_s(self) -> float:
        return self.client_cpu_user_s + self.client_cpu_sys_s


class BenchError(Exception):
    pass


# processes ------------------------------------------------------------------------------------


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"{process.args!r} exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"nothing listens on port {port} after {START_TIMEOUT_S:.0f} s")


@contextmanager
def server(args: list[str], port: int, core: int, log: Path) -> Iterator[int]:
    """Start a server pinned to `core`; yields its pid; SIGTERM on exit."""
    with log.open("wb") as err, pinned(core):
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
    with terminated(process):
        _wait_for_port(port, process)
        yield process.pid


@dataclass(frozen=True)
class ClientRun:
    stdout: str
    cpu_user_s: float
    cpu_sys_s: float
    wall_s: float
    server_cpu_s: float


def run_client(args: list[str], setup: Setup, server_pid: int) -> ClientRun:
    """Run a client to completion, pinned; its CPU from getrusage of the reaped child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = process_cpu_s(server_pid)
    with pinned(setup.client_core):
        start = time.monotonic()
        result = subprocess.run(
            args, capture_output=True, text=True, timeout=setup.timeout_s, check=False
        )
        wall = time.monotonic() - start
    server_after = process_cpu_s(server_pid)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise BenchError(f"{args[0]} exited with {result.returncode}: {' | '.join(tail)}")
    return ClientRun(
        result.stdout,
        after.ru_utime - before.ru_utime,
        after.ru_stime - before.ru_stime,
        wall,
        server_after - server_before,
    )


# the two clients -------------------------------------------------------------------------------


def h2load_args(port: int, bits: int, setup: Setup) -> list[str]:
    """All page URLs on one connection, as many streams at once as the page has resources."""
    urls = [f"http://127.0.0.1:{port}/{path}" for path in setup.urls_path]
    return [
        "h2load",
        "-n",
        str(setup.fetches * len(urls)),
        "-c",
        "1",
        "-m",
        str(len(urls)),
        "-w",
        str(bits),
        "-W",
        str(bits),
        *urls,
    ]


def check_h2load(stdout: str, setup: Setup) -> None:
    requests = setup.fetches * len(setup.urls_path)
    if f"{requests} succeeded, 0 failed, 0 errored" not in stdout:
        raise BenchError(f"h2load did not complete {requests} requests:\n{stdout}")
    data = re.search(r"traffic: .*\((\d+)\) data", stdout)
    if data is None or int(data.group(1)) != setup.fetches * setup.page_bytes:
        raise BenchError(f"h2load received the wrong number of body bytes:\n{stdout}")


def our_client_args(port: int, window: int, setup: Setup) -> list[str]:
    return [
        sys.executable,
        "-m",
        "agent.cli",
        "fetch",
        f"http://127.0.0.1:{port}/",
        "--initial-window-size",
        str(window),
        "--connection-window",
        str(window),
        "--repeat",
        str(setup.fetches),
        "--manifest",
        str(setup.site / "manifest.json"),
        "--json",
    ]


def check_our_client(stdout: str, setup: Setup) -> float:
    """Every fetch ok and verified against the manifest; returns the fetches' own CPU sum."""
    records = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    if len(records) != setup.fetches:
        raise BenchError(f"our client printed {len(records)} records, expected {setup.fetches}")
    failed = [r["error"] for r in records if not r["ok"]]
    if failed:
        raise BenchError(f"our client failed {len(failed)} fetches: {failed[0]}")
    return float(sum(r["cpu_s"] for r in records))


# one run ---------------------------------------------------------------------------------------


def measure_window(
    run: int, window: int, setup: Setup, nghttpd: tuple[int, int], ours: tuple[int, int]
) -> list[Measurement]:
    bits = nghttp2_bits(window)
    wire_window = 2**bits - 1
    (ng_port, ng_pid), (our_port, our_pid) = nghttpd, ours

    def theirs() -> Measurement:
        result = run_client(h2load_args(ng_port, bits, setup), setup, ng_pid)
        check_h2load(result.stdout, setup)
        return _measurement(run, window, bits, "nghttp2", result, None)

    def our_client() -> Measurement:
        result = run_client(our_client_args(ng_port, wire_window, setup), setup, ng_pid)
        fetch_cpu = check_our_client(result.stdout, setup)
        return _measurement(run, window, bits, "our-client", result, fetch_cpu)

    def our_server() -> Measurement:
        result = run_client(h2load_args(our_port, bits, setup), setup, our_pid)
        check_h2load(result.stdout, setup)
        return _measurement(run, window, bits, "our-server", result, None)

    order = [theirs, our_client, our_server]
    if run % 2:
        order.reverse()
    return [step() for step in order]


def _measurement(
    run: int, window: int, bits: int, case: str, result: ClientRun, fetch_cpu: float | None
) -> Measurement:
    return Measurement(
        run=run,
        window=window,
        bits=bits,
        case=case,
        client_cpu_user_s=result.cpu_user_s,
        client_cpu_sys_s=result.cpu_sys_s,
        client_wall_s=result.wall_s,
        server_cpu_s=result.server_cpu_s,
        fetch_cpu_s=fetch_cpu,
    )


# summary ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    window: int
    bits: int
    runs: int
    client_cpu_ratio: float
    client_wall_ratio: float
    server_cpu_ratio: float
    server_wall_ratio: float
    our_client_cpu_ms_per_fetch: float
    h2load_cpu_ms_per_fetch: float
    our_server_cpu_ms_per_fetch: float
    nghttpd_cpu_ms_per_fetch: float
    our_client_wall_ms_per_fetch: float
    h2load_wall_ms_per_fetch: float
    hashing_ms_per_fetch: float
    client_cpu_ratio_unhashed: float


def hashing_s_per_fetch(setup: Setup, window: int) -> float:
    """What checking one page's bodies costs our client: sha256 over every file, fed in pieces
    of one DATA frame (the window or MAX_FRAME_SIZE), on the client core; best of 3."""
    piece = min(2 ** nghttp2_bits(window) - 1, 16384)
    bodies = [memoryview((setup.site / path).read_bytes()) for path in setup.urls_path]
    best = math.inf
    with pinned(setup.client_core):
        for _ in range(3):
            start = time.process_time()
            for body in bodies:
                digest = hashlib.sha256()
                for offset in range(0, len(body), piece):
                    digest.update(body[offset : offset + piece])
                digest.hexdigest()
            best = min(best, time.process_time() - start)
    return best


def summarise(
    measurements: Sequence[Measurement], fetches: int, hashing_s: dict[int, float]
) -> list[Row]:
    """Per window: medians over runs of the paired ratios (ours / nghttp2 within one run)."""
    rows = []
    for window in sorted({m.window for m in measurements}):
        runs: dict[int, dict[str, Measurement]] = {}
        for m in measurements:
            if m.window == window:
                runs.setdefault(m.run, {})[m.case] = m
        paired = [r for r in runs.values() if len(r) == 3]
        if not paired:
            continue
        med = _MedianOver(paired)
        per_fetch_ms = 1000.0 / fetches
        hashing = hashing_s[window]
        rows.append(
            Row(
                window=window,
                bits=paired[0]["nghttp2"].bits,
                runs=len(paired),
                client_cpu_ratio=med(
                    lambda r: r["our-client"].client_cpu_s / r["nghttp2"].client_cpu_s
                ),
                client_wall_ratio=med(
                    lambda r: r["our-client"].client_wall_s / r["nghttp2"].client_wall_s
                ),
                server_cpu_ratio=med(
                    lambda r: r["our-server"].server_cpu_s / r["nghttp2"].server_cpu_s
                ),
                server_wall_ratio=med(
                    lambda r: r["our-server"].client_wall_s / r["nghttp2"].client_wall_s
                ),
                our_client_cpu_ms_per_fetch=med(lambda r: r["our-client"].client_cpu_s)
                * per_fetch_ms,
                h2load_cpu_ms_per_fetch=med(lambda r: r["nghttp2"].client_cpu_s) * per_fetch_ms,
                our_server_cpu_ms_per_fetch=med(lambda r: r["our-server"].server_cpu_s)
                * per_fetch_ms,
                nghttpd_cpu_ms_per_fetch=med(lambda r: r["nghttp2"].server_cpu_s) * per_fetch_ms,
                our_client_wall_ms_per_fetch=med(lambda r: r["our-client"].client_wall_s)
                * per_fetch_ms,
                h2load_wall_ms_per_fetch=med(lambda r: r["nghttp2"].client_wall_s) * per_fetch_ms,
                hashing_ms_per_fetch=hashing * 1000.0,
                client_cpu_ratio_unhashed=med(_unhashed_ratio(hashing * fetches)),
            )
        )
    return rows


def _unhashed_ratio(hashing_s: float) -> Callable[[dict[str, Measurement]], float]:
    def ratio(run: dict[str, Measurement]) -> float:
        return (run["our-client"].client_cpu_s - hashing_s) / run["nghttp2"].client_cpu_s

    return ratio


class _MedianOver:
    def __init__(self, runs: list[dict[str, Measurement]]) -> None:
        self.runs = runs

    def __call__(self, value: Callable[[dict[str, Measurement]], float]) -> float:
        return statistics.median(value(r) for r in self.runs)


def markdown_table(rows: Sequence[Row]) -> str:
    lines = [
        "| window B | nghttp2 -w/-W N (2^N-1 B) | client CPU ours/h2load | client wall "
        "ours/h2load | server CPU ours/nghttpd | server wall ours/nghttpd | CPU ms/fetch: our "
        "client, h2load, our server, nghttpd | client CPU ratio without body hashing "
        "(hashing ms/fetch) | runs |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.window} | {r.bits} ({2**r.bits - 1}) | {r.client_cpu_ratio:.2f} | "
            f"{r.client_wall_ratio:.2f} | {r.server_cpu_ratio:.2f} | {r.server_wall_ratio:.2f} | "
            f"{r.our_client_cpu_ms_per_fetch:.0f}, {r.h2load_cpu_ms_per_fetch:.0f}, "
            f"{r.our_server_cpu_ms_per_fetch:.0f}, {r.nghttpd_cpu_ms_per_fetch:.0f} | "
            f"{r.client_cpu_ratio_unhashed:.2f} ({r.hashing_ms_per_fetch:.1f}) | {r.runs} |"
        )
    return "\n".join(lines) + "\n"


def describe(setup: Setup, windows: Sequence[int], runs: int) -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{setup.fetches} page fetches per measurement ({len(setup.urls_path)} resources, "
        f"{setup.page_bytes} body bytes each), {runs} interleaved runs, windows "
        f"{', '.join(map(str, windows))}.\n"
        f"Pinning: servers (nghttpd, h2iot-agent serve) on core {setup.server_core}, clients "
        f"(h2load, h2iot-agent fetch) on core {setup.client_core}; {os.cpu_count()} cores, "
        f"load average at start {load}; {platform.platform()}, Python "
        f"{platform.python_version()}, {_tool_version()}.\n"
        f"h2load: one process, `-n {setup.fetches * len(setup.urls_path)} -c 1 -m "
        f"{len(setup.urls_path)} -w N -W N` over the page's {len(setup.urls_path)} URLs (one "
        "connection, the page's resources in flight together). Our client: one process, "
        f"`fetch --repeat {setup.fetches}` (a new connection per page fetch: the index, then "
        "its subresources together), stream and connection window 2^N-1 bytes, bodies checked "
        "against the manifest. Client CPU is the whole process's, startup included.\n"
    )


def _tool_version() -> str:
    out = subprocess.run(["h2load", "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "h2load version unknown"


# main ------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=68, help="page fetches per measurement")
    parser.add_argument("--runs", type=int, default=5, help="interleaved runs (median is shown)")
    parser.add_argument(
        "--windows",
        default=",".join(map(str, STUDY_WINDOWS)),
        help="comma-separated windows in bytes (default: the study's sweep)",
    )
    parser.add_argument("--site", type=Path, default=REPO / "data" / "site")
    parser.add_argument("--out", type=Path, help="results directory (default data/bench/...)")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per client run")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 5 fetches, windows 256,4096,65535, 1 run"
    )
    parser.add_argument(
        "--summarise",
        type=Path,
        metavar="DIR",
        help="only (re)write the summary of DIR/measurements.csv (give the run's --fetches)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.fetches, args.runs, args.windows = 5, 1, ",".join(map(str, QUICK_WINDOWS))
    return args


def prepare_site(site: Path) -> tuple[tuple[str, ...], int]:
    if not (site / "manifest.json").is_file():
        print(f"building the default site in {site}", file=sys.stderr)
        build_site(site, seed=0, total_bytes=DEFAULT_TOTAL_BYTES)
    manifest = load_manifest(site)
    paths = (manifest.index, *(f.path for f in manifest.files if f.path != manifest.index))
    return paths, sum(f.size_bytes for f in manifest.files)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for tool in ("h2load", "nghttpd"):
        if shutil.which(tool) is None:
            print(f"agent_vs_nghttp2: error: {tool} not on PATH (apt install nghttp2)")
            return 2
    try:
        windows = [int(w) for w in args.windows.split(",")]
    except ValueError:
        print(f"agent_vs_nghttp2: error: --windows {args.windows!r} is not a list of integers")
        return 2
    paths, page_bytes = prepare_site(args.site.resolve())
    setup = Setup(
        site=args.site.resolve(),
        urls_path=paths,
        page_bytes=page_bytes,
        fetches=args.fetches,
        server_core=args.server_core,
        client_core=args.client_core,
        timeout_s=args.timeout,
    )
    if args.summarise is not None:
        # An interrupted run: only windows measured in all three ways within a run count.
        recorded = load_measurements(args.summarise / "measurements.csv")
        runs = len({m.run for m in recorded})
        windows = sorted({m.window for m in recorded})
        header = describe(setup, windows, runs) + f"Summarised from {args.summarise}.\n"
        write_summary(args.summarise, header, recorded, setup)
        return 0
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"agent-vs-nghttp2-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    header = describe(setup, windows, args.runs)
    print(header, flush=True)
    ng_port, our_port = free_port(), free_port()
    nghttpd_args = ["nghttpd", "--no-tls", "-d", str(setup.site), str(ng_port)]
    our_args = [
        sys.executable,
        "-m",
        "agent.cli",
        "serve",
        "--root",
        str(setup.site),
        "--port",
        str(our_port),
        "--trial-log",
        str(out / "server-trials.jsonl"),
    ]
    measurements: list[Measurement] = []
    try:
        with (
            server(nghttpd_args, ng_port, setup.server_core, out / "nghttpd.log") as ng_pid,
            server(our_args, our_port, setup.server_core, out / "our-server.log") as our_pid,
        ):
            for run in range(args.runs):
                for window in windows:
                    batch = measure_window(
                        run, window, setup, (ng_port, ng_pid), (our_port, our_pid)
                    )
                    measurements.extend(batch)
                    by_case = {m.case: m for m in batch}
                    print(
                        f"run {run + 1}/{args.runs} window {window}: client CPU ours "
                        f"{by_case['our-client'].client_cpu_s:.2f} s vs h2load "
                        f"{by_case['nghttp2'].client_cpu_s:.2f} s; server CPU ours "
                        f"{by_case['our-server'].server_cpu_s:.2f} s vs nghttpd "
                        f"{by_case['nghttp2'].server_cpu_s:.2f} s",
                        flush=True,
                    )
                    write_csv(out / "measurements.csv", measurements)
    except (BenchError, subprocess.TimeoutExpired) as exc:
        print(f"agent_vs_nghttp2: error: {exc}", file=sys.stderr)
        return 1
    write_summary(out, header, measurements, setup)
    return 0


def write_summary(out: Path, header: str, measurements: list[Measurement], setup: Setup) -> None:
    windows = sorted({m.window for m in measurements})
    hashing = {window: hashing_s_per_fetch(setup, window) for window in windows}
    rows = summarise(measurements, setup.fetches, hashing)
    table = markdown_table(rows)
    write_csv(out / "summary.csv", rows)
    (out / "summary.md").write_text(header + "\n" + table)
    print(table)
    print(f"results in {out}")


def load_measurements(path: Path) -> list[Measurement]:
    with path.open(newline="") as source:
        return [
            Measurement(
                run=int(row["run"]),
                window=int(row["window"]),
                bits=int(row["bits"]),
                case=row["case"],
                client_cpu_user_s=float(row["client_cpu_user_s"]),
                client_cpu_sys_s=float(row["client_cpu_sys_s"]),
                client_wall_s=float(row["client_wall_s"]),
                server_cpu_s=float(row["server_cpu_s"]),
                fetch_cpu_s=float(row["fetch_cpu_s"]) if row["fetch_cpu_s"] else None,
            )
            for row in csv.DictReader(source)
        ]


if __name__ == "__main__":
    sys.exit(main())
