"""How many trials the optimizing search takes to find what the full grid finds, per sampler.

    .venv/bin/python benchmarks/search_vs_grid.py                         # local and rpi3b
    .venv/bin/python benchmarks/search_vs_grid.py --profiles rpi3b --samplers tpe,random \\
        --seeds 1,2,3 --grid-repetitions 3
    .venv/bin/python benchmarks/search_vs_grid.py --profiles local --samplers tpe --seeds 1 \\
        --grid-repetitions 2 --budget 12 --total-bytes 200000 \\
        --set 'sweep.initial_window_size=[1024, 65535]' --search-set search.repetitions=2  # smoke
    .venv/bin/python benchmarks/search_vs_grid.py --summarise data/bench/search-vs-grid-X

Per profile, one full grid (`h2iot sweep configs/optimize-grid.toml`: 4 windows x 2 frame sizes
x 3 WINDOW_UPDATE policies = 24 points x `--grid-repetitions`, the page workload on two local
agents and the virtual meter), then, for each seed of `--seeds` (run.seed, which seeds optuna's
sampler) and each sampler of `--samplers`, one optimizing search of the same space
(`h2iot sweep configs/optimize.toml`, minimising energy_above_idle_mj) with `search.budget` =
`--budget`, by default the grid's own trial count, so the search can run until it stops by
itself (every point decided, or the sampler converged). Seeds outermost, samplers inside: the
shared machine's load drifts less between neighbouring searches than across the whole run.
Every sweep gets the profile's overrides: `local` as the configs say, `rpi3b` both nodes
emulating a Pi 3B (configs/local-rpi3b.toml's device profile, its FastEthernet link and the
relay's 0.5 ms; needs root), and on both `workload.total_bytes = --total-bytes` (1 MB, not the
configs' 7 MB: a trial is a few tenths of a second here), `run.idle_baseline_s = 1` and
`energy.idle_end = false` (a 1 s idle baseline before the trials and none after them, instead
of 5 s twice: the objective is energy *above* idle, and the sweeps' overhead is not measured).

The measure. The grid's own trials decide what "as good as the best" means: the grid's best
point is the lowest mean of energy_above_idle_mj (analysis.pareto.best over the intervals of
analysis.optimize.point_scores of the grid's ok trials, with the search's objectives), and the
*target set* is that point plus every point whose t-interval at the grid's confidence overlaps
it (analysis.pareto.tied): the points the full grid itself cannot tell from its best. For each
search, from its trace (optimize.csv, one row per proposal, `best` = its best-so-far point,
`trials_used` = its trials so far):

- trials to reach: `trials_used` at the first proposal from which the best-so-far point is in
  the target set and stays in it to the end of the search (none if the final best is not in
  it): what the search must have spent before stopping it there would have given an answer the
  grid cannot fault;
- reached: whether it got there at all (the same as its final best lying in the target set);
- trials used: all the trials it ran before it stopped, against the grid's count;
- final = grid's best: whether its final best is the grid's best point itself (stricter: with
  several tied points, which of them each run's noise puts first is chance);
- why it stopped (events.jsonl `search_done`: budget, exhausted, converged).

A search whose trials to reach (or even whose trials used) is well below the grid's count finds
what the grid finds for less; `random` is the baseline the model-based samplers (TPE, NSGA-II)
are measured against. With one run.seed the samplers start alike: optuna's TPE draws its first
10 proposals and NSGA-II its whole first generation (50) with a RandomSampler of that seed, so
they propose the random sampler's points until then (summary.md counts the proposals each pair
of samplers had in common); they differ only after it. The searches measure at other times than
the grid, on the same shared cores: a point the grid ranks best can rank otherwise in a
search's own trials, which is why the target set, not the single best point, is the criterion.

Writes, under `--out` (default data/bench/search-vs-grid-<UTC time>/): per profile a folder
with the grid's run (`grid/`) and each search's (`<sampler>-seed<k>/`), each sweep's log beside
them, `searches.csv` (a row per search), `summary.md` (the tables) and `results.json` (every
figure, each sweep's wall time and the 1/5/15-minute load averages at its start and end).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench_support import PROFILES, write_csv

from analysis.load import Run, load_run, read_events
from analysis.optimize import Point, SearchFacts, intervals, point_scores, search_facts
from analysis.pareto import best, tied
from analysis.stats import Summary

REPO = Path(__file__).resolve().parents[1]

GRID_CONFIG = REPO / "configs" / "optimize-grid.toml"
SEARCH_CONFIG = REPO / "configs" / "optimize.toml"
COMMON = ("run.idle_baseline_s=1", "energy.idle_end=false")
LoadAverage = tuple[float, float, float]


@dataclass(frozen=True)
class Sweep:
    """One sweep through the CLI: its run folder, wall time and the load around it."""

    run_dir: str
    log: str
    wall_s: float
    load_start: LoadAverage
    load_end: LoadAverage


@dataclass(frozen=True)
class Grid:
    """The full grid's verdict: its best point and the points its intervals cannot tell from it."""

    best: Point
    best_mean: float
    best_ci: tuple[float, float]
    best_n: int
    tied: tuple[Point, ...]
    points: int
    trials: int  # ok trials
    planned: int  # points x repetitions
    # Every point the grid measured, lowest mean first: (point, mean, ci_low, ci_high, n).
    measured: tuple[tuple[Point, float, float, float, int], ...] = ()


@dataclass(frozen=True)
class Search:
    """One search against the grid (a row of searches.csv)."""

    profile: str
    sampler: str
    seed: int
    trials_to_reach: int | None
    trials_used: int
    proposals: int
    points_measured: int
    final_best: str
    final_in_set: bool
    final_is_grid_best: bool
    stopped: str
    wall_s: float
    run_dir: str


@dataclass
class Profile:
    name: str
    grid_sweep: Sweep
    grid: Grid
    axes: tuple[str, ...]
    searches: list[Search] = field(default_factory=list)
    search_sweeps: list[Sweep] = field(default_factory=list)
    proposals: dict[str, list[str]] = field(default_factory=dict)  # sampler-seed -> proposals


def _load() -> LoadAverage:
    one, five, fifteen = os.getloadavg()
    return (one, five, fifteen)


def sweep(config: Path, sets: Sequence[str], out: Path, name: str) -> Sweep:
    """`h2iot sweep CONFIG --no-dashboard --out OUT/NAME --set ...`; aborts on a non-zero exit."""
    argv = [sys.executable, "-m", "controller.cli", "sweep", str(config), "--no-dashboard"]
    argv += ["--out", str(out / name)]
    for text in sets:
        argv += ["--set", text]
    log = out / f"{name}.log"
    load_start = _load()
    started = time.monotonic()
    with log.open("w") as handle:
        handle.write(" ".join(argv) + "\n\n")
        handle.flush()
        status = subprocess.run(
            argv, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, check=False
        ).returncode
    wall_s = time.monotonic() - started
    if status != 0:
        raise SystemExit(f"{name}: `{' '.join(argv[3:])}` exited {status}: see {log}")
    (run_dir,) = (out / name).iterdir()
    return Sweep(str(run_dir), str(log), wall_s, load_start, _load())


def search_objectives() -> SearchFacts:
    """The search's objectives as configs/optimize.toml states them."""
    search = tomllib.loads(SEARCH_CONFIG.read_text())["search"]
    relative = search.get("relative_to")
    return SearchFacts(
        objectives=tuple(search["objectives"]),
        relative_to=None if relative in (None, "none") else str(relative),
        sampler=str(search.get("sampler", "tpe")),
        budget=int(search["budget"]),
        grid_points=0,
        grid_repetitions=0,
    )


def grid_facts(grid: Run, objectives: SearchFacts) -> SearchFacts:
    """The grid run has no [search]: its facts by hand, the search's objectives on its grid."""
    sweep_axes = grid.config.get("sweep", {})
    points = math.prod(len(values) for values in sweep_axes.values())
    repetitions = int(grid.config.get("run", {}).get("repetitions", 0))
    return SearchFacts(
        objectives=objectives.objectives,
        relative_to=objectives.relative_to,
        sampler="grid",
        budget=points * repetitions,
        grid_points=points,
        grid_repetitions=repetitions,
    )


def grid_verdict(grid: Run, facts: SearchFacts) -> Grid:
    measured = intervals(point_scores(grid, facts), grid.confidence)
    found = best(measured)
    if not found:
        raise SystemExit(f"{grid.path}: no point with results")
    top = found[0]
    summary: Summary = measured[top][0]
    return Grid(
        best=top,
        best_mean=summary.mean,
        best_ci=(summary.ci_low, summary.ci_high),
        best_n=summary.n,
        tied=tuple(tied(top, measured)),
        points=len(measured),
        trials=len(grid.ok),
        planned=facts.grid_points * facts.grid_repetitions,
        measured=tuple(
            (point, own[0].mean, own[0].ci_low, own[0].ci_high, own[0].n)
            for point, own in sorted(measured.items(), key=lambda item: item[1][0].mean)
        ),
    )


def parse_point(text: str, axes: Sequence[str]) -> Point | None:
    """optimize.csv's `best` ("axis=value, axis=value") in `axes`' order; None for none."""
    if not text.strip():
        return None
    pairs = dict(part.split("=", 1) for part in text.split(", "))
    return tuple(pairs[axis] for axis in axes)


def label(axes: Sequence[str], point: Point) -> str:
    return ", ".join(f"{a}={v}" for a, v in zip(axes, point, strict=True))


def judge(
    run_dir: Path, profile: str, sampler: str, seed: int, grid: Grid, axes: Sequence[str]
) -> tuple[Search, list[str]]:
    """A search against the grid's target set; also the points it was proposed, in order."""
    run = load_run(run_dir)
    facts = search_facts(run)
    if facts is None:
        raise SystemExit(f"{run_dir}: not an optimizing search")
    with (run_dir / "optimize.csv").open() as handle:
        trace = list(csv.DictReader(handle))
    target = {grid.best, *grid.tied}
    reached: int | None = None
    for row in trace:
        so_far = parse_point(row["best"].split("; ")[0], axes)
        if so_far in target:
            if reached is None:
                reached = int(row["trials_used"])
        else:
            reached = None
    final = parse_point(trace[-1]["best"].split("; ")[0], axes) if trace else None
    done = [e for e in read_events(run_dir) if e.get("event") == "search_done"]
    proposed = [label(axes, tuple(row[a] for a in axes)) for row in trace]
    measured = {p for p, row in zip(proposed, trace, strict=True) if row["status"] == "measured"}
    search = Search(
        profile=profile,
        sampler=sampler,
        seed=seed,
        trials_to_reach=reached,
        trials_used=int(trace[-1]["trials_used"]) if trace else 0,
        proposals=len(trace),
        points_measured=len(measured),
        final_best="" if final is None else label(axes, final),
        final_in_set=final in target,
        final_is_grid_best=final == grid.best,
        stopped=str(done[-1].get("reason", "")) if done else "not finished",
        wall_s=0.0,
        run_dir=str(run_dir),
    )
    return search, proposed


def _range(values: Sequence[int]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):g} ({min(values)}..{max(values)})"


def table(profile: Profile, samplers: Sequence[str]) -> str:
    grid = profile.grid
    lines = [
        "| sampler | searches | reached (k of n) | trials to reach (median, min..max) | "
        "trials used (median) | final = grid's best (k of n) | grid's trials | stopped |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for sampler in samplers:
        mine = [s for s in profile.searches if s.sampler == sampler]
        if not mine:
            continue
        n = len(mine)
        reach = [s.trials_to_reach for s in mine if s.trials_to_reach is not None]
        used = statistics.median(s.trials_used for s in mine)
        exact = sum(s.final_is_grid_best for s in mine)
        reasons: dict[str, int] = {}
        for s in mine:
            reasons[s.stopped] = reasons.get(s.stopped, 0) + 1
        stopped = ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
        lines.append(
            f"| {sampler} | {n} | {len(reach)} of {n} | {_range(reach)} | {used:g} | "
            f"{exact} of {n} | {grid.trials} | {stopped} |"
        )
    return "\n".join(lines)


def details(profile: Profile) -> str:
    lines = [
        "| sampler | seed | trials to reach | trials used | proposals | points measured | "
        "final best | in target set | stopped | wall s |",
        "|---|---:|---:|---:|---:|---:|---|---|---|---:|",
    ]
    for s in profile.searches:
        reach = "-" if s.trials_to_reach is None else str(s.trials_to_reach)
        lines.append(
            f"| {s.sampler} | {s.seed} | {reach} | {s.trials_used} | {s.proposals} | "
            f"{s.points_measured} | {s.final_best} | {'yes' if s.final_in_set else 'no'} | "
            f"{s.stopped} | {s.wall_s:.0f} |"
        )
    return "\n".join(lines)


def grid_line(profile: Profile, objective: str) -> str:
    g = profile.grid
    tied = "; ".join(label(profile.axes, p) for p in g.tied) or "none"
    return (
        f"Grid ({g.trials} ok trials of {g.planned}, {g.points} points, "
        f"{profile.grid_sweep.wall_s:.0f} s): best {label(profile.axes, g.best)}, {objective} "
        f"{g.best_mean:.4g} mJ [{g.best_ci[0]:.4g}, {g.best_ci[1]:.4g}] (n = {g.best_n}); "
        f"tied with it (intervals overlap): {tied}. Target set: {1 + len(g.tied)} of "
        f"{g.points} points (a point drawn at random lies in it with probability "
        f"{(1 + len(g.tied)) / g.points:.2f})."
    )


def grid_table(profile: Profile, objective: str) -> str:
    g = profile.grid
    target = {g.best, *g.tied}
    lines = [
        f"| point | {objective}, mean [CI] | n | in target set |",
        "|---|---|---:|---|",
    ]
    for point, mean, low, high, n in g.measured:
        lines.append(
            f"| {label(profile.axes, point)} | {mean:.4g} [{low:.4g}, {high:.4g}] | {n} | "
            f"{'best' if point == g.best else 'yes' if point in target else 'no'} |"
        )
    return "\n".join(lines)


def shared_prefixes(profile: Profile) -> list[str]:
    """Per seed, how many first proposals each pair of samplers had in common."""
    out = []
    keys = list(profile.proposals)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            (sa, _, seed_a), (sb, _, seed_b) = a.rpartition("-"), b.rpartition("-")
            if seed_a != seed_b:
                continue
            first, second = profile.proposals[a], profile.proposals[b]
            common = 0
            for x, y in zip(first, second, strict=False):
                if x != y:
                    break
                common += 1
            whole = " (all of the shorter)" if common == min(len(first), len(second)) else ""
            out.append(f"seed {seed_a}: {sa}/{sb} {common}{whole}")
    return out


def same_sequences(profile: Profile) -> list[str]:
    """Pairs of searches that were proposed the same points in the same order."""
    names = list(profile.proposals)
    return [
        f"{a} and {b}"
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if profile.proposals[a] == profile.proposals[b]
    ]


def section(profile: Profile, samplers: Sequence[str], objective: str) -> str:
    sweeps = [profile.grid_sweep, *profile.search_sweeps]
    first, last = sweeps[0].load_start, sweeps[-1].load_end
    parts = [
        f"## {profile.name}",
        table(profile, samplers),
        grid_line(profile, objective),
        "Per search:",
        details(profile),
        f"Load average (1/5/15 min) at the grid's start: {first[0]:.2f}/{first[1]:.2f}/"
        f"{first[2]:.2f}; after the last search: {last[0]:.2f}/{last[1]:.2f}/{last[2]:.2f} "
        f"(every sweep's in results.json; {os.cpu_count()} cores, shared).",
    ]
    same = same_sequences(profile)
    if same:
        parts.append("Searches proposed the same points in the same order: " + "; ".join(same))
    prefixes = shared_prefixes(profile)
    if prefixes:
        parts.append(
            "First proposals in common between samplers of the same seed (run.seed seeds "
            "each sampler's own random draws): " + "; ".join(prefixes) + "."
        )
    parts += ["The grid's points, lowest mean first:", grid_table(profile, objective)]
    return "\n\n".join(parts)


def _merged(*parts: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in parts:
        merged.update(part)
    return merged


def _results(
    profiles: Sequence[Profile], args: argparse.Namespace, argv: Sequence[str]
) -> dict[str, object]:
    return {
        "argv": list(argv),
        "grid_config": str(GRID_CONFIG.relative_to(REPO)),
        "search_config": str(SEARCH_CONFIG.relative_to(REPO)),
        "cpu_count": os.cpu_count(),
        "profiles": {
            p.name: {
                "overrides": _sets(p.name, args),
                "search_overrides": list(args.search_set),
                "axes": list(p.axes),
                "grid": _merged(asdict(p.grid_sweep), asdict(p.grid)),
                "searches": [
                    _merged(
                        asdict(s),
                        asdict(w),
                        {"proposed": p.proposals.get(f"{s.sampler}-{s.seed}")},
                    )
                    for s, w in zip(p.searches, p.search_sweeps, strict=True)
                ],
            }
            for p in profiles
        },
    }


def _sets(profile: str, args: argparse.Namespace) -> list[str]:
    return [
        *PROFILES[profile],
        f"workload.total_bytes={args.total_bytes}",
        *COMMON,
        *args.set,
    ]


def start_profile(name: str, grid_sweep: Sweep, objectives: SearchFacts) -> Profile:
    grid_run = load_run(Path(grid_sweep.run_dir))
    grid = grid_verdict(grid_run, grid_facts(grid_run, objectives))
    return Profile(name, grid_sweep, grid, grid_run.axes)


def add_search(profile: Profile, sampler: str, seed: int, done: Sweep) -> Search:
    search, proposed = judge(
        Path(done.run_dir), profile.name, sampler, seed, profile.grid, profile.axes
    )
    search = Search(**{**asdict(search), "wall_s": done.wall_s})
    profile.searches.append(search)
    profile.search_sweeps.append(done)
    profile.proposals[f"{sampler}-{seed}"] = proposed
    return search


def run_profile(name: str, args: argparse.Namespace, out: Path, objectives: SearchFacts) -> Profile:
    here = out / name
    here.mkdir(parents=True, exist_ok=True)
    sets = _sets(name, args)
    print(f"{name}: grid, {args.grid_repetitions} repetitions", flush=True)
    grid_sweep = sweep(
        GRID_CONFIG,
        [*sets, f"run.repetitions={args.grid_repetitions}", f"run.name=grid-{name}"],
        here,
        "grid",
    )
    profile = start_profile(name, grid_sweep, objectives)
    print(f"{name}: {grid_line(profile, objectives.objectives[0])}", flush=True)
    budget = args.budget or profile.grid.planned
    for seed in args.seeds:
        for sampler in args.samplers:
            tag = f"{sampler}-seed{seed}"
            extra = [
                f"search.sampler={sampler}",
                f"run.seed={seed}",
                f"search.budget={budget}",
                f"run.name=search-{name}-{tag}",
                *args.search_set,
            ]
            done = sweep(SEARCH_CONFIG, [*sets, *extra], here, tag)
            search = add_search(profile, sampler, seed, done)
            reach = search.trials_to_reach
            print(
                f"{name}: {tag}: reached at {reach if reach is not None else '-'}, used "
                f"{search.trials_used}, final {search.final_best} "
                f"({'in' if search.final_in_set else 'NOT in'} the target set), "
                f"{search.stopped}, {done.wall_s:.0f} s",
                flush=True,
            )
    write_csv(here / "searches.csv", profile.searches)
    return profile


def summarise(out: Path, objectives: SearchFacts, samplers: Sequence[str]) -> list[Profile]:
    """The profiles of an earlier run under `out`, judged again, searches in the order they ran
    (seed, then `samplers`' order); wall times and load averages from its results.json."""
    recorded: dict[str, Any] = {}
    results = out / "results.json"
    if results.exists():
        recorded = json.loads(results.read_text()).get("profiles", {})
    order = {name: index for index, name in enumerate(samplers)}
    nan = (math.nan, math.nan, math.nan)

    def known(profile: str, run_dir: Path, log: Path) -> Sweep:
        entry = recorded.get(profile, {})
        rows: list[dict[str, Any]] = [entry.get("grid", {}), *entry.get("searches", [])]
        for row in rows:
            if Path(row.get("run_dir", "")).resolve() == run_dir.resolve():
                start, end = row["load_start"], row["load_end"]
                return Sweep(str(run_dir), str(log), row["wall_s"], tuple(start), tuple(end))
        return Sweep(str(run_dir), str(log), math.nan, nan, nan)

    profiles: list[Profile] = []
    for here in sorted(p for p in out.iterdir() if p.is_dir() and p.name in PROFILES):
        (grid_dir,) = (here / "grid").iterdir()
        profile = start_profile(
            here.name, known(here.name, grid_dir, here / "grid.log"), objectives
        )
        tagged = []
        for folder in here.iterdir():
            sampler, _, seed = folder.name.partition("-seed")
            if folder.is_dir() and seed.isdigit():
                tagged.append((int(seed), order.get(sampler, len(order)), sampler, folder))
        for seed_number, _, sampler, folder in sorted(tagged):
            (run_dir,) = folder.iterdir()
            log = here / f"{folder.name}.log"
            add_search(profile, sampler, seed_number, known(here.name, run_dir, log))
        profiles.append(profile)
    return profiles


def _numbers(text: str) -> list[int]:
    return [int(value) for value in text.split(",")]


def _names(text: str) -> list[str]:
    return [value.strip() for value in text.split(",") if value.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=_names, default=["local", "rpi3b"])
    parser.add_argument("--samplers", type=_names, default=["tpe", "random", "nsga2"])
    parser.add_argument("--seeds", type=_numbers, default=[1, 2, 3, 4, 5], help="run.seed values")
    parser.add_argument("--grid-repetitions", type=int, default=5, help="the grid's repetitions")
    parser.add_argument(
        "--budget", type=int, default=0, help="search.budget (default: the grid's trial count)"
    )
    parser.add_argument("--total-bytes", type=int, default=1_000_000, help="workload.total_bytes")
    parser.add_argument(
        "--set", action="append", default=[], help="more overrides for every sweep (KEY=VALUE)"
    )
    parser.add_argument(
        "--search-set",
        action="append",
        default=[],
        help="more overrides for the searches only (search.repetitions=2)",
    )
    parser.add_argument("--out", type=Path, help="default data/bench/search-vs-grid-<UTC time>")
    parser.add_argument(
        "--summarise", type=Path, metavar="OUT", help="only judge OUT's runs again (no sweeps)"
    )
    args = parser.parse_args()
    argv: list[str] = sys.argv[1:]
    if args.summarise is not None and (args.summarise / "results.json").exists():
        # The recorded run's options, for the preamble and the samplers' order.
        argv = json.loads((args.summarise / "results.json").read_text())["argv"]
        args = parser.parse_args([*argv, "--summarise", str(args.summarise.resolve())])
    unknown = [p for p in args.profiles if p not in PROFILES]
    if unknown:
        parser.error(f"--profiles: unknown {unknown[0]} (local, rpi3b)")
    if args.grid_repetitions < 2:
        parser.error("--grid-repetitions: at least 2 (an interval needs them)")
    objectives = search_objectives()
    objective = objectives.objectives[0]
    if args.summarise is not None:
        out: Path = args.summarise.resolve()
        profiles = summarise(out, objectives, args.samplers)
        sections = [section(p, args.samplers, objective) for p in profiles]
        (out / "summary.md").write_text(_preamble(args) + "\n\n".join(sections) + "\n")
        (out / "results.json").write_text(
            json.dumps(_results(profiles, args, argv), indent=2) + "\n"
        )
        for profile in profiles:
            write_csv(out / profile.name / "searches.csv", profile.searches)
        print((out / "summary.md").read_text(), end="")
        return 0
    if "rpi3b" in args.profiles and os.geteuid() != 0:
        print("rpi3b: the emulated Pi 3B needs root; skipped", file=sys.stderr)
        args.profiles.remove("rpi3b")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"search-vs-grid-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    profiles = []
    sections = []
    for name in args.profiles:
        profiles.append(run_profile(name, args, out, objectives))
        sections.append(section(profiles[-1], args.samplers, objective))
        # Rewritten after each profile: a later profile's failure keeps the earlier's.
        (out / "summary.md").write_text(_preamble(args) + "\n\n".join(sections) + "\n")
        (out / "results.json").write_text(
            json.dumps(_results(profiles, args, argv), indent=2) + "\n"
        )
    print()
    print((out / "summary.md").read_text(), end="")
    print(f"\n(written to {out})")
    return 0


def _preamble(args: argparse.Namespace) -> str:
    return (
        f"Searches ({SEARCH_CONFIG.relative_to(REPO)}) against the full grid "
        f"({GRID_CONFIG.relative_to(REPO)}, {args.grid_repetitions} repetitions), "
        f"{args.total_bytes} B pages, seeds {','.join(map(str, args.seeds))}, budget "
        f"{args.budget or 'the grid trial count'}. Target set: the grid's best point and the "
        "points whose intervals overlap it in the grid's trials. Trials to reach: trials_used at "
        "the first proposal from which the search's best so far stays in the target set.\n\n"
    )


if __name__ == "__main__":
    sys.exit(main())
