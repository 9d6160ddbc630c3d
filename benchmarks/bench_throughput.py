"""Trial throughput of one shared study (`h2iot sweep --study`) with 1, 2 and 3 benches here.

    .venv/bin/python benchmarks/bench_throughput.py                      # 1, 2, 3 benches, 2 rounds
    .venv/bin/python benchmarks/bench_throughput.py --benches 1 2 --rounds 1 --windows 4095,65535 \\
        --repetitions 3 --total-bytes 200000                           # a smoke run

A bench is one `h2iot sweep configs/local.toml --study sqlite:///OUT/.../study.db --bench bN`
process: a controller with its own pair of local agents (each server on a free port of its own)
and its own virtual meter. For each count N of `--benches`, N benches start at once on a fresh
SQLite study with the same plan (the config's 9 windows x `--repetitions`, 63 trials by default,
of `--total-bytes` pages; a 1 s idle baseline, none after the sweep) and take its trials between
them until none is left. A plain sweep of the same plan without `--study` runs beside them
(`--no-plain` skips it). Each configuration runs `--rounds` times, interleaved (plain, 1, 2, 3,
plain, 1, 2, 3, ...: the shared machine's load drifts less between neighbours), and the table
gives the medians over rounds. From every bench's trials.csv:

- trials: the ok rows' trial ids, each counted once across benches (a trial taken again after
  its bench went quiet may have rows on two benches); `duplicates` in results.json counts the rest;
- span: first trial's fetch start (`t_wall_start_ns`) to the last one's end (`t_wall_end_ns`)
  over every bench; trials/min = trials / span; speed-up: that over the 1-bench figure;
- per-bench trials: each bench's share, per round (`;`-separated);
- first trial after: launch to a bench's first fetch start (start-up, the idle baseline and its
  wait for quiet nodes, the study's join), the first bench's / the last bench's;
- wall: launch until every bench has exited (a bench with nothing left to take looks again
  every heartbeat / 2 s, 5 s by default, while another's trial runs: wall exceeds the first
  trial's wait plus the span by up to that).

Against the plain sweep, the 1-bench figure gives the storage's cost per trial (the seconds per
trial of one minus the other). The machine's cores are shared: every bench pins its client and
server agents to the same two cores (configs/local.toml nodes.*.cpu), so the figure bounds the
coordination's overhead, not how benches on separate hardware scale (about linearly, each
adding its own trial rate less that storage cost). Writes summary.md, results.json (every
round's raw numbers) and each bench's run folder and log under --out (default
data/bench/throughput-<UTC time>/).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench_support import terminated

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "local.toml"
PLAIN = "plain sweep"


@dataclass(frozen=True)
class Trial:
    trial_id: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class BenchRun:
    """One bench's part of one configuration's round."""

    bench: str
    trials: int  # its ok rows
    failed_rows: int
    first_trial_s: float | None  # launch -> its first fetch start; None when it took none
    idle_waited_s: float | None  # its idle baseline's wait for quiet nodes (manifest)
    idle_quiet: bool | None
    run_dir: str | None


@dataclass(frozen=True)
class Round:
    """One configuration (N benches sharing a study, or the plain sweep) in one round."""

    label: str  # "1", "2", ... or PLAIN
    round: int
    trials: int  # distinct ok trial ids across the benches
    duplicates: int  # further ok rows of an id already counted
    span_s: float
    wall_s: float
    benches: list[BenchRun] = field(default_factory=list)

    @property
    def per_min(self) -> float:
        return 60 * self.trials / self.span_s if self.span_s > 0 else 0.0


def _overrides(args: argparse.Namespace) -> list[str]:
    sets = [
        f"workload.total_bytes={args.total_bytes}",
        f"run.repetitions={args.repetitions}",
        f"run.idle_baseline_s={args.idle_baseline_s:g}",
        "energy.idle_end=false",
    ]
    if args.windows:
        sets.append(f"sweep.initial_window_size=[{', '.join(map(str, args.windows))}]")
    return [item for value in sets for item in ("--set", value)]


def _ok_trials(run_dir: Path) -> tuple[list[Trial], int]:
    """A run's ok trials and its count of failed rows (none without trials.csv)."""
    path = run_dir / "trials.csv"
    if not path.exists():
        return [], 0
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    ok = [
        Trial(row["trial_id"], int(row["t_wall_start_ns"]), int(row["t_wall_end_ns"]))
        for row in rows
        if row["status"] == "ok"
    ]
    return ok, len(rows) - len(ok)


def _bench_run(name: str, out: Path, launched_ns: int) -> tuple[BenchRun, list[Trial]]:
    runs = sorted(out.iterdir()) if out.exists() else []
    if not runs:
        return BenchRun(name, 0, 0, None, None, None, None), []
    (run_dir,) = runs
    trials, failed = _ok_trials(run_dir)
    baseline: dict[str, object] = {}
    manifest = run_dir / "manifest.json"
    if manifest.exists():
        found = json.loads(manifest.read_text()).get("idle_baseline")
        baseline = found if isinstance(found, dict) else {}
    waited = baseline.get("waited_s")
    quiet = baseline.get("quiet")
    first = min((t.start_ns for t in trials), default=None)
    return BenchRun(
        bench=name,
        trials=len(trials),
        failed_rows=failed,
        first_trial_s=None if first is None else (first - launched_ns) / 1e9,
        idle_waited_s=float(waited) if isinstance(waited, int | float) else None,
        idle_quiet=quiet if isinstance(quiet, bool) else None,
        run_dir=str(run_dir),
    ), trials


def run_round(label: str, number: int, args: argparse.Namespace, out: Path) -> Round:
    """Start the configuration's benches at once, wait for all, read their trials."""
    here = out / f"round{number}-{'plain' if label == PLAIN else f'n{label}'}"
    here.mkdir(parents=True)
    names = ["plain"] if label == PLAIN else [f"b{i}" for i in range(1, int(label) + 1)]
    base = [
        sys.executable, "-m", "controller.cli", "sweep", str(CONFIG), "--no-dashboard",
        *_overrides(args),
    ]  # fmt: skip
    study = f"sqlite:///{here / 'study.db'}"
    launched_ns = time.time_ns()
    with ExitStack() as stack:
        processes: dict[str, subprocess.Popen[bytes]] = {}
        for name in names:
            argv = [*base, "--out", str(here / name)]
            if label != PLAIN:
                argv += ["--study", study, "--bench", name, "--heartbeat", str(args.heartbeat)]
            log = stack.enter_context((here / f"{name}.log").open("wb"))
            process = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
            # On leaving early (a timeout, Ctrl-C), each bench is stopped: it drains.
            stack.enter_context(terminated(process))
            processes[name] = process
        deadline = time.monotonic() + args.timeout
        for name, process in processes.items():
            try:
                status = process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise SystemExit(
                    f"{label} benches, round {number}: still running after {args.timeout:g} s "
                    f"(see {here})"
                ) from None
            if status != 0:
                raise SystemExit(f"bench {name} exited {status}: see {here / f'{name}.log'}")
    wall_s = (time.time_ns() - launched_ns) / 1e9
    benches: list[BenchRun] = []
    trials: list[Trial] = []
    for name in names:
        bench, taken = _bench_run(name, here / name, launched_ns)
        benches.append(bench)
        trials += taken
    distinct = {t.trial_id for t in trials}
    span_s = (
        (max(t.end_ns for t in trials) - min(t.start_ns for t in trials)) / 1e9 if trials else 0.0
    )
    return Round(label, number, len(distinct), len(trials) - len(distinct), span_s, wall_s, benches)


@dataclass(frozen=True)
class Row:
    """A configuration's medians over its rounds."""

    label: str
    rounds: int
    trials: float
    span_s: float
    per_min: float
    speed_up: float | None
    shares: str
    first_trial: str
    wall_s: float


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarise(results: Sequence[Round], labels: Sequence[str]) -> list[Row]:
    by_label = {label: [r for r in results if r.label == label] for label in labels}
    one = by_label.get("1")
    one_rate = _median([r.per_min for r in one]) if one else None
    rows = []
    for label, rounds in by_label.items():
        if not rounds:
            continue
        per_min = _median([r.per_min for r in rounds])
        firsts = [
            [b.first_trial_s for b in r.benches if b.first_trial_s is not None] for r in rounds
        ]
        first = _median([min(f) for f in firsts if f])
        last = _median([max(f) for f in firsts if f])
        rows.append(
            Row(
                label=label,
                rounds=len(rounds),
                trials=_median([r.trials for r in rounds]),
                span_s=_median([r.span_s for r in rounds]),
                per_min=per_min,
                speed_up=per_min / one_rate if one_rate else None,
                shares="; ".join("+".join(str(b.trials) for b in r.benches) for r in rounds),
                first_trial=f"{first:.1f}" if label == PLAIN else f"{first:.1f} / {last:.1f}",
                wall_s=_median([r.wall_s for r in rounds]),
            )
        )
    return rows


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| benches | trials | span s | trials/min | speed-up vs 1 bench | per-bench trials "
        "| first trial after s (first / last bench) | wall s |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        speed_up = "-" if r.speed_up is None else f"{r.speed_up:.2f}"
        lines.append(
            f"| {r.label} | {r.trials:g} | {r.span_s:.1f} | {r.per_min:.1f} | {speed_up} | "
            f"{r.shares} | {r.first_trial} | {r.wall_s:.1f} |"
        )
    return "\n".join(lines)


def notes(rows: Sequence[Row], results: Sequence[Round], load: Sequence[float]) -> str:
    nodes = tomllib.loads(CONFIG.read_text())["nodes"]
    cores = os.cpu_count()
    lines = [
        f"Medians over rounds (per-bench trials: every round's split). This machine has {cores} "
        f"cores and every bench pins its client agent to core {nodes['client']['cpu']} and its "
        f"server agent to core {nodes['server']['cpu']} ({CONFIG.relative_to(REPO)} nodes.*.cpu): "
        "the benches compete for the same cores, so these figures bound the coordination's "
        "overhead, not the scaling of benches on separate hardware (there throughput grows about "
        "linearly with benches, each adding its own trial rate less the storage's per-trial cost).",
    ]
    rate = {r.label: r.per_min for r in rows}
    if "1" in rate and PLAIN in rate and rate["1"] > 0 and rate[PLAIN] > 0:
        per_trial = 60 / rate["1"] - 60 / rate[PLAIN]
        lines.append(
            f"The storage's cost per trial (1 bench against the plain sweep): {per_trial:+.3f} s "
            f"({60 / rate['1']:.3f} s against {60 / rate[PLAIN]:.3f} s a trial)."
        )
    odd = [
        f"round {r.round}, {r.label}: {b.bench} took no trials"
        for r in results
        for b in r.benches
        if b.trials == 0
    ] + [
        f"round {r.round}, {r.label}: {r.duplicates} trial(s) ok on two benches"
        for r in results
        if r.duplicates
    ]
    failed = sum(b.failed_rows for r in results for b in r.benches)
    if failed:
        odd.append(f"{failed} failed attempt row(s) in all (retried; not counted)")
    noisy = sum(b.idle_quiet is False for r in results for b in r.benches)
    if noisy:
        odd.append(f"{noisy} bench(es) never found their nodes quiet for the idle baseline")
    if odd:
        lines.append("Notes: " + "; ".join(odd) + ".")
    lines.append(
        f"Load average (1 min) at the start and the end: {load[0]:.2f}, {load[1]:.2f} (with other "
        "work on the cores, more benches also take a larger share of them from it)."
    )
    return "\n\n".join(lines)


def _windows(text: str) -> list[int]:
    """--windows 4095,65535"""
    return [int(value) for value in text.split(",")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benches", type=int, nargs="+", default=[1, 2, 3], metavar="N")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each configuration")
    parser.add_argument(
        "--repetitions", type=int, default=7, help="run.repetitions (default 7: 63 trials)"
    )
    parser.add_argument(
        "--windows",
        type=_windows,
        help="comma-separated sweep.initial_window_size values (default: the config's 9)",
    )
    parser.add_argument("--total-bytes", type=int, default=1_000_000, help="workload.total_bytes")
    parser.add_argument("--idle-baseline-s", type=float, default=1.0, help="run.idle_baseline_s")
    parser.add_argument("--heartbeat", type=int, default=10, help="the benches' --heartbeat")
    parser.add_argument("--no-plain", action="store_true", help="no plain sweep (no --study)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per configuration, s")
    parser.add_argument("--out", type=Path, help="default data/bench/throughput-<UTC time>")
    args = parser.parse_args()
    if any(n < 1 for n in args.benches) or args.rounds < 1:
        parser.error("--benches and --rounds: at least 1")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out: Path = args.out or REPO / "data" / "bench" / f"throughput-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    labels = ([] if args.no_plain else [PLAIN]) + [str(n) for n in args.benches]
    load = [os.getloadavg()[0]]
    results: list[Round] = []
    for number in range(1, args.rounds + 1):
        for label in labels:
            result = run_round(label, number, args, out)
            results.append(result)
            print(
                f"round {number}, {label}: {result.trials} trials in {result.span_s:.1f} s "
                f"({result.per_min:.1f}/min), per bench "
                f"{'+'.join(str(b.trials) for b in result.benches)}, wall {result.wall_s:.1f} s",
                flush=True,
            )
    load.append(os.getloadavg()[0])
    rows = summarise(results, labels)
    summary = f"{table(rows)}\n\n{notes(rows, results, load)}\n"
    (out / "summary.md").write_text(summary)
    raw = {
        "argv": sys.argv[1:],
        "config": str(CONFIG.relative_to(REPO)),
        "overrides": _overrides(args)[1::2],
        "cpu_count": os.cpu_count(),
        "load_average_1min": load,
        "rounds": [{**asdict(r), "per_min": r.per_min} for r in results],
        "summary": [asdict(r) for r in rows],
    }
    (out / "results.json").write_text(json.dumps(raw, indent=2) + "\n")
    print()
    print(summary, end="")
    print(f"\n(written to {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
