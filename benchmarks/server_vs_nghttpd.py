"""Benchmark: the server agent's CPU per page against the C servers', the way a sweep uses it.

One connection per page, the same client for both servers: over HTTP/2 (h2c, and h2 over TLS)
the study's `nghttp -nas --no-push --no-dep -w N -W N` with the sweep's trial header, one
process per fetch of the ~7 MB default page, against `h2iot-agent serve` and `nghttpd`; over
HTTP/3 ngtcp2's `gtlsclient` (all the page's URLs on one connection, fixed windows, bodies
saved and their sizes checked: it sends no trial header, so our server accounts no trial there;
`--no-trial-header` leaves it out over HTTP/2 as well), against `serve --protocol h3` and
ngtcp2's `gtlsserver`. The client runs pinned to one core, every server to the other. Each
server's CPU is the scheduler's count for its process (/proc/PID/task/*/schedstat), read around
a batch of `--fetches` page fetches; per protocol and window the servers take their batches in
an order that rotates round by round, `--rounds` times, so a disturbance from other work on the
machine falls on all of them. Every server gets one unmeasured fetch per window first (its
imports and first-use costs are not a page's).

Our servers are the variants asked for (`--ours`: the event loop each runs, asyncio or
uvloop), and with `--baseline DIR` the server of another checkout (e.g. a worktree of the
previous commit, run as it is) beside them: before/after ratios measured side by side.
The table gives, per protocol, window and server of ours, the medians over rounds of its CPU
per page and the anchor's, the median of the paired ratios (the same round's) and their
spread (lowest..highest).

Run from the repository root with the project's venv (the h3 and uvloop extras):
    .venv/bin/python benchmarks/server_vs_nghttpd.py [--fetches 15] [--rounds 3]
        [--protocols h2c,h2,h3] [--windows 4095,65535] [--h3-windows 4096,65535]
        [--ours asyncio,uvloop] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from agent_vs_nghttp2 import BenchError, nghttp2_bits, prepare_site, server
from bench_support import (
    REPO,
    add_server_bench_options,
    free_port,
    process_cpu_s,
    process_user_sys_s,
    write_csv,
)
from client_vs_nghttp import check_nghttp, nghttp_args, run_pinned
from h3_vs_ngtcp2 import Served, Setup, fixed_windows, free_udp_port, gtlsserver, our_server

from agent.event_loop import EVENT_LOOPS
from agent.site import load_manifest
from agent.trial_header import TRIAL_HEADER
from controller.run.tls import run_credentials

PROTOCOLS = ("h2c", "h2", "h3")
ANCHORS = {"h2c": "nghttpd", "h2": "nghttpd", "h3": "gtlsserver"}
BASELINE = "baseline"


@dataclass(frozen=True)
class Batch:
    """One server's CPU over one batch of page fetches."""

    round: int
    protocol: str
    window: int
    server: str  # ANCHORS' name, "ours/LOOP", or BASELINE
    pages: int
    server_cpu_ms_per_page: float
    # Its split (/proc/PID/stat, clock ticks): system time is mostly the kernel's TCP or UDP
    # work, about the same for any server moving the page; user time is the server's own.
    server_user_ms_per_page: float
    server_sys_ms_per_page: float
    wall_ms_per_page: float  # the batch's, client processes included
    loadavg_1m: float


@dataclass(frozen=True)
class Bench:
    setup: Setup
    files: tuple[tuple[str, int], ...]  # the page's (path, size), index first
    out: Path
    trial_header: bool  # nghttp tags each fetch as a sweep's trial (our server accounts it)


# clients ----------------------------------------------------------------------------------------


def fetch_h2(bench: Bench, port: int, tls: bool, window: int, trial_id: str) -> None:
    scheme = "https" if tls else "http"
    argv = nghttp_args(f"{scheme}://127.0.0.1:{port}/", window)
    if bench.trial_header:
        argv[1:1] = ["-H", f"{TRIAL_HEADER}: {trial_id}"]
    child = run_pinned(argv, bench.setup.client_core, 600)
    check_nghttp(child.stdout, len(bench.files))


def fetch_h3(bench: Bench, port: int, window: int) -> None:
    with tempfile.TemporaryDirectory(dir=bench.out) as saved:
        urls = [f"https://127.0.0.1:{port}/{path}" for path, _size in bench.files]
        argv = [
            "gtlsclient", "-q", "--exit-on-all-streams-close", *fixed_windows(window),
            f"--download={saved}", "127.0.0.1", str(port), *urls,
        ]  # fmt: skip
        run_pinned(argv, bench.setup.client_core, 600)
        for path, size in bench.files:
            # gtlsclient saves each body under its URL's last segment.
            got = Path(saved, Path(path).name)
            if not got.is_file() or got.stat().st_size != size:
                raise BenchError(f"gtlsclient: {path} not saved whole from port {port}")


# servers ----------------------------------------------------------------------------------------


@contextmanager
def nghttpd(bench: Bench, tls: bool, log: Path) -> Iterator[Served]:
    port = free_port()
    setup = bench.setup
    args = ["nghttpd", "-d", str(setup.site), str(port)]
    args += [str(setup.key), str(setup.cert)] if tls else ["--no-tls"]
    with server(args, port, bench.setup.server_core, log) as pid:
        yield Served(port, pid)


def start_servers(
    stack: ExitStack, bench: Bench, protocol: str, ours: Sequence[str], baseline: Path | None
) -> dict[str, Served]:
    """The protocol's anchor and servers of ours, by name, all running on the server core."""
    setup, out = bench.setup, bench.out
    anchor = (
        gtlsserver(setup, free_udp_port(), out / f"gtlsserver-{protocol}.log")
        if protocol == "h3"
        else nghttpd(bench, protocol == "h2", out / f"nghttpd-{protocol}.log")
    )
    servers = {ANCHORS[protocol]: stack.enter_context(anchor)}
    for loop in ours:
        log = out / f"ours-{loop}-{protocol}.log"
        options = [] if loop == "asyncio" else ["--event-loop", loop]
        servers[f"ours/{loop}"] = stack.enter_context(our_server(setup, protocol, log, options))
    if baseline is not None:
        log = out / f"baseline-{protocol}.log"
        servers[BASELINE] = stack.enter_context(our_server(setup, protocol, log, tree=baseline))
    return servers


# measuring --------------------------------------------------------------------------------------


def fetcher(bench: Bench, protocol: str, window: int, port: int) -> Callable[[str], None]:
    if protocol == "h3":
        return lambda _trial_id: fetch_h3(bench, port, window)
    return lambda trial_id: fetch_h2(bench, port, protocol == "h2", window, trial_id)


def measure(
    bench: Bench, round_: int, protocol: str, window: int, name: str, served: Served
) -> Batch:
    fetch = fetcher(bench, protocol, window, served.port)
    pages = bench.setup.fetches
    (user_s, sys_s), cpu_s = process_user_sys_s(served.pid), process_cpu_s(served.pid)
    start = time.monotonic()
    for page in range(pages):
        fetch(f"r{round_}-{protocol}-{window}-{name}-{page}")
    wall_s = time.monotonic() - start
    cpu_s = process_cpu_s(served.pid) - cpu_s
    user_after, sys_after = process_user_sys_s(served.pid)
    per_page_ms = 1e3 / pages
    return Batch(
        round_,
        protocol,
        window,
        name,
        pages,
        cpu_s * per_page_ms,
        (user_after - user_s) * per_page_ms,
        (sys_after - sys_s) * per_page_ms,
        wall_s * per_page_ms,
        os.getloadavg()[0],
    )


def summary(batches: Sequence[Batch]) -> str:
    lines = [
        "| protocol | window B | server | ours CPU ms/page (user + sys) | anchor "
        "| anchor CPU ms/page (user + sys) | ours / anchor (median of rounds) "
        "| spread of rounds | rounds | load 1 min |",
        "|---|---:|---|---:|---|---:|---:|---|---:|---:|",
    ]
    cells = sorted(
        {(b.protocol, b.window) for b in batches}, key=lambda c: (PROTOCOLS.index(c[0]), c[1])
    )
    for protocol, window in cells:
        anchor = ANCHORS[protocol]
        here = [b for b in batches if (b.protocol, b.window) == (protocol, window)]
        theirs = {b.round: b for b in here if b.server == anchor}
        for name in dict.fromkeys(b.server for b in here if b.server != anchor):
            ours = [b for b in here if b.server == name and b.round in theirs]
            if not ours:
                continue
            ratios = [
                b.server_cpu_ms_per_page / theirs[b.round].server_cpu_ms_per_page for b in ours
            ]
            lines.append(
                f"| {protocol} | {window} | {name} | {_cpu_cell(ours)} | {anchor} "
                f"| {_cpu_cell([theirs[b.round] for b in ours])} "
                f"| {statistics.median(ratios):.2f} | {min(ratios):.2f}..{max(ratios):.2f} "
                f"| {len(ours)} | {statistics.median(b.loadavg_1m for b in ours):.1f} |"
            )
    return "\n".join(lines) + "\n"


def _cpu_cell(batches: Sequence[Batch]) -> str:
    """Medians of the CPU per page and of its user and system parts."""
    total, user, system = (
        statistics.median(getattr(b, f"server_{part}_ms_per_page") for b in batches)
        for part in ("cpu", "user", "sys")
    )
    return f"{total:.1f} ({user:.1f} + {system:.1f})"


# main -------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=15, help="page fetches per batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--windows", default="4095,65535", help="h2c and h2: 2^N - 1 bytes each")
    parser.add_argument("--h3-windows", default="4096,65535", help="h3, in bytes")
    parser.add_argument(
        "--ours",
        default="asyncio",
        help="our servers' event loops, comma-separated (asyncio, uvloop)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of this repository: its server (default options) as one more",
    )
    parser.add_argument(
        "--no-trial-header",
        dest="trial_header",
        action="store_false",
        help="h2c, h2: fetch without the trial header (our server then accounts no trials)",
    )
    add_server_bench_options(parser)
    args = parser.parse_args(argv)
    args.protocols = args.protocols.split(",")
    args.ours = args.ours.split(",") if args.ours else []
    bad = [p for p in args.protocols if p not in PROTOCOLS] + [
        loop for loop in args.ours if loop not in EVENT_LOOPS
    ]
    if bad:
        parser.error(f"not a protocol or event loop: {', '.join(bad)}")
    try:
        args.windows = [int(w) for w in args.windows.split(",")]
        args.h3_windows = [int(w) for w in args.h3_windows.split(",")]
    except ValueError:
        parser.error("--windows and --h3-windows are comma-separated byte counts")
    unmapped = [w for w in args.windows if 2 ** nghttp2_bits(w) - 1 != w]
    if unmapped:
        parser.error(f"--windows {unmapped}: nghttp takes only 2^N - 1 bytes")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tools = ["gtlsclient", "gtlsserver"] if "h3" in args.protocols else []
    tools += ["nghttp", "nghttpd"] if {"h2c", "h2"} & set(args.protocols) else []
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        print(f"server_vs_nghttpd: error: {', '.join(missing)} not on PATH (.ci/apt/)")
        return 2
    site = args.site.resolve()
    prepare_site(site)
    manifest = load_manifest(site)
    files = sorted(
        ((f.path, f.size_bytes) for f in manifest.files), key=lambda f: f[0] != manifest.index
    )
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = (args.out or REPO / "data" / "bench" / f"server-vs-nghttpd-{stamp}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    credentials = run_credentials(out, ["127.0.0.1", "localhost"], stamp)
    setup = Setup(
        site, tuple(path for path, _ in files), credentials.ca_cert, credentials.server_cert,
        credentials.server_key, args.fetches, args.server_core, args.client_core,
    )  # fmt: skip
    bench = Bench(setup, tuple(files), out, args.trial_header)
    windows = {p: args.h3_windows if p == "h3" else args.windows for p in args.protocols}
    print(
        f"{args.fetches} pages per batch, {args.rounds} rounds; servers on core "
        f"{args.server_core}, clients on core {args.client_core}; load {os.getloadavg()}",
        flush=True,
    )
    batches: list[Batch] = []
    baseline = None if args.baseline is None else args.baseline.resolve()
    try:
        with ExitStack() as stack:
            servers = {
                p: start_servers(stack, bench, p, args.ours, baseline) for p in args.protocols
            }
            for protocol, window in ((p, w) for p in args.protocols for w in windows[p]):
                for name, served in servers[protocol].items():
                    fetcher(bench, protocol, window, served.port)(f"warm-{name}")
            for round_ in range(args.rounds):
                for protocol in args.protocols:
                    for window in windows[protocol]:
                        order = list(servers[protocol].items())
                        shift = round_ % len(order)
                        for name, served in order[shift:] + order[:shift]:
                            batch = measure(bench, round_, protocol, window, name, served)
                            batches.append(batch)
                            print(
                                f"round {round_ + 1}/{args.rounds} {protocol} W={window} {name}: "
                                f"{batch.server_cpu_ms_per_page:.1f} ms/page "
                                f"(load {batch.loadavg_1m:.2f})",
                                flush=True,
                            )
                        write_csv(out / "measurements.csv", batches)
    except BenchError as exc:
        print(f"server_vs_nghttpd: error: {exc}", file=sys.stderr)
        return 1
    table = summary(batches)
    (out / "summary.md").write_text(table)
    print(table)
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
