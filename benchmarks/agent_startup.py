"""The agent's start-up cost: CPU of `h2iot-agent --version` and of a page trial's process
outside its fetch, beside a bare interpreter, and the trial command's heaviest imports.

    .venv/bin/python benchmarks/agent_startup.py [--rounds 20] [--out DIR]

Each round runs, one after the other and pinned to core 0: the venv's bare interpreter
(`python -c pass`), `h2iot-agent --version`, and `h2iot-agent trial URL --workload page --json`
against this agent's server (h2 engine, core 1) serving the 7 MB page. A process's CPU is
user + system from wait4's rusage; a trial's start-up is its process's CPU less the fetch's
own (the record's cpu_s, measured inside the process around the fetch), so it is interpreter
start-up, imports, argument parsing, set-up and exit. The table gives the median and the
10th..90th percentiles over the rounds; then `python -X importtime`'s heaviest modules (self
time) of one trial process.

A development venv installs the project editable: its import finder adds about a millisecond
that a node's wheel install (`h2iot nodes deploy`) does not have.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_support import free_port, pinned, terminated, write_csv

BIN = Path(sys.executable).parent
AGENT = str(BIN / "h2iot-agent")


@dataclass(frozen=True)
class StartupSample:
    round: int
    command: str
    cpu_s: float
    fetch_cpu_s: float


def _cpu_of(argv: list[str]) -> tuple[float, str]:
    """The child's user + system CPU in seconds and its stdout."""
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: exit status {child.returncode}")
        out.seek(0)
        return usage.ru_utime + usage.ru_stime, out.read().decode()


def _round(index: int, url: str) -> list[StartupSample]:
    bare, _ = _cpu_of([sys.executable, "-c", "pass"])
    version, _ = _cpu_of([AGENT, "--version"])
    trial, record_line = _cpu_of([AGENT, "trial", url, "--workload", "page", "--json"])
    record = json.loads(record_line)
    if not record["ok"]:
        raise SystemExit(f"trial failed: {record['error']}")
    return [
        StartupSample(index, "python -c pass", bare, 0.0),
        StartupSample(index, "h2iot-agent --version", version, 0.0),
        StartupSample(index, "h2iot-agent trial (outside the fetch)", trial, record["cpu_s"]),
    ]


def _heaviest_imports(url: str, count: int) -> list[tuple[int, int, str]]:
    """(self us, cumulative us, module) of one trial process, heaviest self time first."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", AGENT, "trial", url, "--workload", "page", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((int(own), int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:count]


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    low = ordered[int(0.1 * (len(ordered) - 1))]
    high = ordered[int(0.9 * (len(ordered) - 1) + 0.5)]
    return f"{statistics.median(ordered) * 1e3:.1f} ({low * 1e3:.1f}..{high * 1e3:.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", type=Path, help="write samples.csv here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        site = Path(scratch) / "site"
        subprocess.run([AGENT, "site", "build", str(site)], check=True, capture_output=True)
        port = free_port()
        with pinned(1):
            server = subprocess.Popen(
                [AGENT, "serve", "--root", str(site), "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        with terminated(server):
            url = f"http://127.0.0.1:{port}/"
            time.sleep(1.0)
            samples: list[StartupSample] = []
            with pinned(0):
                for index in range(args.rounds):
                    samples.extend(_round(index, url))
                imports = _heaviest_imports(url, 15)
    print(f"CPU per process, ms: median (p10..p90) of {args.rounds} rounds, pinned to core 0\n")
    print("| process | CPU | above a bare interpreter |\n|---|---|---|")
    bare = statistics.median(s.cpu_s for s in samples if s.command == "python -c pass")
    for command in dict.fromkeys(s.command for s in samples):
        own = [s.cpu_s - s.fetch_cpu_s for s in samples if s.command == command]
        print(f"| {command} | {_ms(own)} | {(statistics.median(own) - bare) * 1e3:.1f} |")
    fetch = [s.fetch_cpu_s for s in samples if s.fetch_cpu_s]
    print(f"\nthe fetch itself (the record's cpu_s): {_ms(fetch)} ms")
    print("\nheaviest imports of one trial process (python -X importtime, self time):\n")
    print("| module | self ms | cumulative ms |\n|---|---|---|")
    for own_us, cumulative_us, name in imports:
        print(f"| {name} | {own_us / 1e3:.1f} | {cumulative_us / 1e3:.1f} |")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_csv(args.out / "samples.csv", samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
