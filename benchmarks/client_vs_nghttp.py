"""Benchmark: the page fetch's client CPU, our h2 engine against the study's `nghttp -nas`.

One process per fetch on both sides, as a sweep runs them: `h2iot-agent trial URL --workload
page --json` (our figure is the trial record's own `cpu_s`, the fetch's window: connection,
requests, every body checked against the manifest) in each variant asked for (`--variants`:
the event loop, asyncio or uvloop, and the body check, sha256 or size, and `/events` to
write each fetch's event trace, `--events-dir`), and `nghttp -nas
--no-push --no-dep -w N -W N URL` (its figure is the whole process's getrusage, start-up
included, as the nghttp2 engine records it; it checks nothing). Both against the same
`nghttpd --no-tls` on the default site, nghttpd pinned to one core and the clients to the
other, fetches interleaved (window by window, the two clients in alternating order), so a
disturbance from other work on the machine falls on both. The table gives medians and the
ratio of the medians per window, and the median of the paired ratios beside it.

Windows are in bytes and must be 2^N - 1 (nghttp takes N): stream and connection window alike,
as the study passed the same N to `-w` and `-W`.

Run from the repository root with the project's venv (the uvloop extra for its variants):
    .venv/bin/python benchmarks/client_vs_nghttp.py [--fetches 15] [--windows 255,4095,65535]
        [--variants asyncio/sha256,uvloop/sha256,uvloop/size] [--baseline DIR]

With `--baseline DIR` (another checkout, e.g. `git worktree add DIR COMMIT`), that checkout's
client runs as one more variant (asyncio/sha256) in the same rounds: a change's cost as the
ratio of two medians measured side by side (benchmarks/README.md, "Trace and measurement
overhead").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from agent_vs_nghttp2 import BenchError, nghttp2_bits, prepare_site, server
from bench_support import free_port, median_interval, pinned, write_csv

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WINDOWS = (255, 4095, 65535)
# Our client's variants: event loop / body check (agent.event_loop, the page's `verify`).
DEFAULT_VARIANTS = ("asyncio/sha256", "uvloop/sha256", "uvloop/size")
NGHTTP = "nghttp"
BASELINE = "baseline"
"""--baseline's client: another checkout's (e.g. before a change), as BASELINE_VARIANT."""
BASELINE_VARIANT = "asyncio/sha256"


@dataclass(frozen=True)
class Fetch:
    """One page fetch by one client process."""

    round: int
    window: int
    client: str  # one of our variants ("uvloop/size") or NGHTTP
    cpu_s: float  # ours: the record's cpu_s; nghttp: the process's user + sys
    cpu_user_s: float
    cpu_sys_s: float
    process_cpu_s: float  # the whole client process (start-up included), both clients
    wall_s: float  # the client process's, spawn to exit
    loadavg_1m: float


@dataclass(frozen=True)
class Child:
    stdout: str
    user_s: float
    sys_s: float
    wall_s: float


def run_pinned(args: list[str], core: int, timeout_s: float, cwd: Path | None = None) -> Child:
    """A client to completion on `core` (in `cwd`); its CPU from getrusage of the reaped
    child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with pinned(core):
        start = time.monotonic()
        result = subprocess.run(
            args, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=cwd
        )
        wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise BenchError(f"{args[0]} exited with {result.returncode}: {' | '.join(tail)}")
    return Child(
        result.stdout, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall
    )


def ours_args(url: str, window: int, manifest: Path, variant: str, out: Path) -> list[str]:
    loop, check, *traced = (
        BASELINE_VARIANT.split("/") if variant == BASELINE else variant.split("/")
    )
    events = ["--events-dir", str(out / "events")] if traced else []
    return [
        sys.executable,
        "-m",
        "agent.cli",
        "trial",
        url,
        "--workload",
        "page",
        "--json",
        "--setting",
        f"initial_window_size={window}",
        "--connection-window",
        str(window),
        "--manifest",
        str(manifest),
        "--event-loop",
        loop,
        "--param",
        f"verify={check}",
        *events,
    ]


def nghttp_args(url: str, window: int) -> list[str]:
    bits = str(nghttp2_bits(window))
    return ["nghttp", "-nas", "--no-push", "--no-dep", "-w", bits, "-W", bits, url]


def fetch_ours(round_: int, window: int, url: str, args: argparse.Namespace, variant: str) -> Fetch:
    command = ours_args(url, window, args.site / "manifest.json", variant, args.out)
    # `python -m` imports the agent from its working directory first: the baseline's checkout.
    tree = args.baseline if variant == BASELINE else None
    child = run_pinned(command, args.client_core, 600, cwd=tree)
    record = json.loads(child.stdout.splitlines()[0])
    if not record["ok"]:
        raise BenchError(f"our fetch failed: {record['error']}")
    return Fetch(
        round_,
        window,
        variant,
        record["cpu_s"],
        record["cpu_user_s"],
        record["cpu_sys_s"],
        child.user_s + child.sys_s,
        child.wall_s,
        os.getloadavg()[0],
    )


def fetch_nghttp(round_: int, window: int, url: str, args: argparse.Namespace, files: int) -> Fetch:
    child = run_pinned(nghttp_args(url, window), args.client_core, 600)
    check_nghttp(child.stdout, files)
    cpu = child.user_s + child.sys_s
    return Fetch(
        round_,
        window,
        NGHTTP,
        cpu,
        child.user_s,
        child.sys_s,
        cpu,
        child.wall_s,
        os.getloadavg()[0],
    )


def check_nghttp(stdout: str, files: int) -> None:
    """-s ends with one line per response under its "id responseEnd ..." heading: every file of
    the page must be there, answered 200."""
    lines = stdout.splitlines()
    heading = next((i for i, line in enumerate(lines) if line.startswith("id ")), len(lines))
    ok = sum(1 for line in lines[heading + 1 :] if line.split()[4:5] == ["200"])
    if ok != files:
        raise BenchError(f"nghttp: {ok} of the page's {files} files answered 200:\n{stdout}")


def summary_table(fetches: Sequence[Fetch], variants: Sequence[str]) -> str:
    lines = [
        "| window (bytes) | ours: loop/check | fetches | ours: fetch CPU ms (user + sys) "
        "| ours: process CPU ms | nghttp -nas: process CPU ms (user + sys) "
        "| ours / nghttp (medians) | median of paired ratios |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]

    def med(items: Sequence[Fetch], attr: str) -> float:
        return 1000 * statistics.median(getattr(f, attr) for f in items)

    for window in sorted({f.window for f in fetches}):
        theirs = [f for f in fetches if f.window == window and f.client == NGHTTP]
        paired = {f.round: f.cpu_s for f in theirs}
        for variant in variants:
            ours = [f for f in fetches if f.window == window and f.client == variant]
            ratios = [f.cpu_s / paired[f.round] for f in ours if f.round in paired]
            lines.append(
                f"| {window} | {variant} | {len(ours)} | {med(ours, 'cpu_s'):.1f} "
                f"({med(ours, 'cpu_user_s'):.1f} + {med(ours, 'cpu_sys_s'):.1f}) "
                f"| {med(ours, 'process_cpu_s'):.1f} | {med(theirs, 'cpu_s'):.1f} "
                f"({med(theirs, 'cpu_user_s'):.1f} + {med(theirs, 'cpu_sys_s'):.1f}) "
                f"| {med(ours, 'cpu_s') / med(theirs, 'cpu_s'):.2f} "
                f"| {statistics.median(ratios):.2f} |"
            )
    # Against the baseline checkout where there is one, else against the first variant.
    reference = BASELINE if BASELINE in variants else variants[0]
    others = [v for v in variants if v != reference]
    if others:
        lines += ["", *paired_table(fetches, reference, others)]
    return "\n".join(lines) + "\n"


def paired_table(fetches: Sequence[Fetch], reference: str, variants: Sequence[str]) -> list[str]:
    """Each variant's fetch CPU against the `reference` variant's in the same round: the median
    of the paired ratios and its 90 % bootstrap interval (the rounds resampled, seeded)."""
    lines = [
        f"| window (bytes) | ours: loop/check | pairs | / {reference} (median of paired ratios) "
        "| 90 % interval |",
        "|---:|---|---:|---:|---:|",
    ]
    for window in sorted({f.window for f in fetches}):
        base = {f.round: f.cpu_s for f in fetches if f.window == window and f.client == reference}
        for variant in variants:
            ratios = [
                f.cpu_s / base[f.round]
                for f in fetches
                if f.window == window and f.client == variant and f.round in base
            ]
            low, high = median_interval(ratios)
            lines.append(
                f"| {window} | {variant} | {len(ratios)} | {statistics.median(ratios):.3f} "
                f"| {low:.3f} .. {high:.3f} |"
            )
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=15, help="fetches per client and window")
    parser.add_argument("--windows", default=",".join(map(str, DEFAULT_WINDOWS)))
    parser.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help="our client's variants, LOOP/CHECK[/events] each: asyncio or uvloop, sha256 or "
        "size, and /events to write each fetch's event trace",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help=f"another checkout (e.g. a git worktree before a change): its client as one more "
        f"variant, {BASELINE!r} ({BASELINE_VARIANT}), for a before/after ratio side by side",
    )
    parser.add_argument("--site", type=Path, default=REPO / "data" / "site")
    parser.add_argument("--out", type=Path, help="results directory (default data/bench/...)")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    args = parser.parse_args(argv)
    args.site = args.site.resolve()
    args.variants = args.variants.split(",")
    for variant in args.variants:
        words = variant.split("/")
        if not (
            len(words) in (2, 3)
            and words[0] in ("asyncio", "uvloop")
            and words[1] in ("sha256", "size")
            and words[2:] in ([], ["events"])
        ):
            parser.error(
                f"--variants: {variant!r} is not LOOP/CHECK[/events] (asyncio|uvloop/sha256|size)"
            )
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        args.variants.append(BASELINE)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for tool in ("nghttp", "nghttpd"):
        if shutil.which(tool) is None:
            print(f"client_vs_nghttp: error: {tool} not on PATH (apt install nghttp2)")
            return 2
    windows = [int(w) for w in args.windows.split(",")]
    unmapped = [w for w in windows if 2 ** nghttp2_bits(w) - 1 != w]
    if unmapped:
        print(f"client_vs_nghttp: error: windows {unmapped} are not 2^N - 1 bytes")
        return 2
    paths, _page_bytes = prepare_site(args.site)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out = args.out or REPO / "data" / "bench" / f"client-vs-nghttp-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    fetches: list[Fetch] = []
    nghttpd = ["nghttpd", "--no-tls", "-d", str(args.site), str(port)]
    try:
        with server(nghttpd, port, args.server_core, out / "nghttpd.log"):
            for round_ in range(args.fetches):
                for window in windows:
                    steps = [
                        *(partial(fetch_ours, round_, window, url, args, v) for v in args.variants),
                        partial(fetch_nghttp, round_, window, url, args, len(paths)),
                    ]
                    # Each client takes each place in the order in turn, round by round.
                    shift = round_ % len(steps)
                    done = {f.client: f for f in (step() for step in steps[shift:] + steps[:shift])}
                    fetches.extend(done.values())
                    figures = ", ".join(f"{name} {1000 * f.cpu_s:.1f}" for name, f in done.items())
                    load = done[NGHTTP].loadavg_1m
                    round_text = f"round {round_ + 1}/{args.fetches} W={window}"
                    print(f"{round_text}: {figures} ms (load {load:.2f})", flush=True)
                write_csv(out / "measurements.csv", fetches)
    except (BenchError, subprocess.TimeoutExpired) as exc:
        print(f"client_vs_nghttp: error: {exc}", file=sys.stderr)
        return 1
    table = summary_table(fetches, args.variants)
    (out / "summary.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
