"""Benchmark: what a server's event traces cost its own CPU: the nghttp2 engine's (`nghttpd -v`,
its frame log read from a pipe as the agent's relay reads it, against plain `nghttpd`;
`gtlsserver --qlog-dir` against plain `gtlsserver`) and the builtin engine's (`h2iot-agent serve
--events-dir` against `serve`, over h2c and h3; agent/README.md, Event traces).

Per server, the untraced and the traced one run side by side pinned to one core (their output
read and dropped by a thread), a client fetches the default site's page from each in turn
pinned to the other core (the study's for nghttp2's: `nghttp -nas` over h2c, `gtlsclient` over
HTTP/3 with every URL; ours for the builtin's, untraced, sending the trial header so the traced
server writes each fetch's trace), and each fetch's server CPU is the server process's
scheduler time (/proc/PID/task/*/schedstat) before and after: the figure a trial records as
`server_cpu_s` (the nghttp2 engine's from the program alone, the builtin's the agent's whole
process). Fetches alternate which server goes first, so the machine's other work falls on both;
the table gives each median and the median of the paired ratios with a seeded 90 % bootstrap
interval.

Run from the repository root with the project's venv (the h3 extra):
    .venv/bin/python benchmarks/server_trace_cost.py [--fetches 20] [--windows 4095,65535]
        [--engines nghttp2,builtin]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agent_vs_nghttp2 import nghttp2_bits, prepare_site
from bench_support import (
    REPO,
    add_server_bench_options,
    free_port,
    median_interval,
    pinned,
    process_cpu_s,
    terminated,
    write_csv,
)
from h3_vs_ngtcp2 import fixed_windows

from controller.run.tls import run_credentials

START_S = 3.0  # not every server says when it listens: give each this long


@dataclass(frozen=True)
class Fetch:
    round: int
    server: str  # SERVERS' names
    window: int
    traced: bool
    server_cpu_s: float


@dataclass(frozen=True)
class Served:
    """A server program untraced and traced, and the client that fetches the page from it."""

    name: str  # as the table names it
    engine: str
    argv: Callable[[int, bool], list[str]]  # (port, traced) -> the server's command line
    client: Callable[[int, int, str], list[str]]  # (port, window, trial id) -> the client's


def servers(
    args: argparse.Namespace, paths: Sequence[str], tls: Sequence[str], events: Path
) -> list[Served]:
    """Each engine's servers over h2c and h3, with the study's clients for nghttp2's and our
    own (sending the trial header, so our servers write each fetch's trace) for the builtin's."""
    site, key, cert = str(args.site), tls[0], tls[1]
    agent = [sys.executable, "-m", "agent.cli"]

    def ours(protocol: str) -> Callable[[int, bool], list[str]]:
        quic = ["--protocol", "h3", "--cert", cert, "--key", key] if protocol == "h3" else []
        return lambda port, traced: [
            *agent, "serve", "--root", site, "--port", str(port), *quic,
            *(["--events-dir", str(events)] if traced else []),
        ]  # fmt: skip

    def our_client(protocol: str) -> Callable[[int, int, str], list[str]]:
        scheme, quic = (
            ("https", ["--protocol", "h3", "--insecure"]) if protocol == "h3" else ("http", [])
        )
        return lambda port, window, trial: [
            *agent, "trial", f"{scheme}://127.0.0.1:{port}/", "--workload", "page",
            "--manifest", str(args.site / "manifest.json"), "--trial-id", trial, *quic,
            "--setting", f"initial_window_size={window}", "--connection-window", str(window),
        ]  # fmt: skip

    def nghttp(port: int, window: int, trial: str) -> list[str]:
        bits = str(nghttp2_bits(window))
        flags = ["-nas", "--no-push", "--no-dep", "-w", bits, "-W", bits]
        return ["nghttp", *flags, f"http://127.0.0.1:{port}/"]

    def gtlsclient(port: int, window: int, trial: str) -> list[str]:
        urls = [f"https://127.0.0.1:{port}/{path}" for path in paths]
        gtls = ["gtlsclient", "-q", "--exit-on-all-streams-close", *fixed_windows(window)]
        return [*gtls, "127.0.0.1", str(port), *urls]

    return [
        Served(
            "nghttpd -v", "nghttp2",
            lambda port, traced: [
                "nghttpd", *(["-v"] if traced else []), "--no-tls", "-d", site, str(port)
            ],
            nghttp,
        ),
        Served(
            "gtlsserver --qlog-dir", "nghttp2",
            lambda port, traced: [
                "gtlsserver", "-q", *([f"--qlog-dir={events}"] if traced else []), "-d", site,
                "127.0.0.1", str(port), key, cert,
            ],
            gtlsclient,
        ),
        Served("builtin h2c --events-dir", "builtin", ours("h2c"), our_client("h2c")),
        Served("builtin h3 --events-dir", "builtin", ours("h3"), our_client("h3")),
    ]  # fmt: skip


def _drain(stream: IO[bytes]) -> None:
    while stream.read(65536):
        pass


@contextmanager
def _server(argv: Sequence[str], core: int) -> Iterator[int]:
    """The server pinned to `core`, its output read and dropped; its pid."""
    with pinned(core):
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    threading.Thread(target=_drain, args=(process.stdout,), daemon=True).start()
    with terminated(process):
        time.sleep(START_S)
        if process.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited {process.returncode}")
        yield process.pid


def _fetch(argv: Sequence[str], core: int, server_pid: int) -> float:
    """One client run to completion on `core`; the server's CPU seconds over it."""
    before = process_cpu_s(server_pid)
    with pinned(core):
        result = subprocess.run(argv, capture_output=True, timeout=600, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {result.returncode}: {result.stderr[-300:]!r}")
    time.sleep(0.2)  # the server's close (QUIC's draining period) falls in this fetch's count
    return process_cpu_s(server_pid) - before


def measure(args: argparse.Namespace, paths: Sequence[str], out: Path) -> list[Fetch]:
    windows = [int(w) for w in args.windows.split(",")]
    credentials = run_credentials(out, ["127.0.0.1", "localhost"], "bench")
    tls = [str(credentials.server_key), str(credentials.server_cert)]
    events = Path(tempfile.mkdtemp(prefix="bench-server-traces-"))
    chosen = [s for s in servers(args, paths, tls, events) if s.engine in args.engines]
    fetches: list[Fetch] = []
    try:
        with ExitStack() as stack:
            running = []  # (served, traced, port, pid)
            for served in chosen:
                for traced in (False, True):
                    port = free_port()
                    pid = stack.enter_context(_server(served.argv(port, traced), args.server_core))
                    running.append((served, traced, port, pid))
            for round_ in range(args.fetches):
                for window in windows:
                    order = running if round_ % 2 == 0 else running[::-1]
                    for served, traced, port, pid in order:
                        trial = f"r{round_}w{window}{'t' if traced else 'u'}"
                        cpu_s = _fetch(served.client(port, window, trial), args.client_core, pid)
                        fetches.append(Fetch(round_, served.name, window, traced, cpu_s))
                    for path in events.iterdir():
                        path.unlink()
                print(f"round {round_ + 1}/{args.fetches}", flush=True)
                write_csv(out / "measurements.csv", fetches)
    finally:
        shutil.rmtree(events, ignore_errors=True)
    return fetches


def summary(fetches: Sequence[Fetch]) -> str:
    lines = [
        "| server (traced) | window (bytes) | fetches | untraced: server CPU ms "
        "| traced: server CPU ms | traced / untraced (median of paired ratios) | 90 % interval |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for server in dict.fromkeys(f.server for f in fetches):
        for window in sorted({f.window for f in fetches}):
            pairs: dict[int, dict[bool, float]] = {}
            for f in fetches:
                if f.server == server and f.window == window:
                    pairs.setdefault(f.round, {})[f.traced] = f.server_cpu_s
            both = [p for p in pairs.values() if len(p) == 2]
            ratios = [p[True] / p[False] for p in both]
            low, high = median_interval(ratios)
            lines.append(
                f"| {server} | {window} | {len(both)} "
                f"| {1e3 * statistics.median(p[False] for p in both):.1f} "
                f"| {1e3 * statistics.median(p[True] for p in both):.1f} "
                f"| {statistics.median(ratios):.2f} | {low:.2f} .. {high:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=20, help="fetches per server and window")
    parser.add_argument("--windows", default="4095,65535", help="2^N - 1 bytes each (nghttp's)")
    parser.add_argument(
        "--engines",
        default="nghttp2,builtin",
        help="whose servers: nghttp2 (nghttpd, gtlsserver) and/or builtin (ours, h2c and h3)",
    )
    add_server_bench_options(parser)
    args = parser.parse_args(argv)
    args.engines = args.engines.split(",")
    for tool in ("nghttp", "nghttpd", "gtlsclient", "gtlsserver"):
        if shutil.which(tool) is None:
            print(f"server_trace_cost: error: {tool} not on PATH", file=sys.stderr)
            return 2
    args.site = args.site.resolve()
    paths, _page_bytes = prepare_site(args.site)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"server-trace-cost-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    table = summary(measure(args, paths, out))
    (out / "summary.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
