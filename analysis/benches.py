"""Several benches' runs of one shared study (`h2iot sweep --study URL --bench NAME`) read as
one: `<first run>/report/study-<name>/` with report.md, report.html, summary.csv (the per-point
statistics pooled over benches, as a single run's report gives them), bench_effects.csv,
trial_benches.csv (which bench took each trial) and figures/.

Runs are one study's benches when there are two or more, every manifest names the same study
(`study.name`) and they plan the same trials: the same axes, number of planned trials, swept
values and the run's seed, repetitions and order, which is what the plan is built from
(controller.sweep.plan); nodes, meter and link may differ, being what makes a bench. Other runs
(other studies, a mix with runs of their own) are compared with the first as before
(analysis.batch).

Every bench's ok rows are merged with the bench recorded per trial. A trial id in two benches'
runs (its row written just before its bench died, run again elsewhere:
controller/sweep/shared.py) is kept once, the row that started first (`t_wall_start_ns`), and
the report lists the others.

The bench is a blocking factor: each ran its trials on its own nodes and meter, with its own
idle baseline, which may shift all its values. Per metric and point measured on two or more
benches the report gives each bench's mean with its t CI and the bench's effect: its mean
minus the mean of the other benches' trials at that point, with a Welch t interval
(`analysis.stats.welch_difference`) at the run's confidence; it "differs" when the interval
excludes zero. Why this effect:
- a bench's mean minus the pooled mean shares that bench's trials on both sides, so Welch's
  interval, which needs independent samples, would not hold; the bench minus the others is
  the same comparison on independent samples (the deviation from the pooled mean is it times
  n_others / n);
- pairwise differences give k (k - 1) / 2 rows per point and metric for k benches; one row per
  bench stays readable, and with two benches it is the pairwise difference (each bench's
  effect the other's negated).
Energy includes each bench's own idle draw; energy above idle subtracts each bench's own
baseline, so it is the one that compares the work a trial did.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from analysis.columns import MANIFEST, TRIALS, metric_of
from analysis.compare import check_comparable
from analysis.detectability import resolvability
from analysis.differences import interval_text
from analysis.document import (
    Block,
    Bullets,
    Heading,
    Image,
    Links,
    Paragraph,
    Table,
    to_html,
    to_markdown,
)
from analysis.errors import RunFormatError
from analysis.facts import text_of
from analysis.figures import Source, figure_client, save
from analysis.load import Run
from analysis.manifest import config_value
from analysis.meter_floor import point_floor
from analysis.points import (
    DEFAULT_TARGET_RELATIVE_HALF_WIDTH,
    ENERGY_METRICS,
    plain,
    summarize_points,
)
from analysis.report import FIGURES_DIR, REPORT_DIR, write_summary_csv
from analysis.stats import summarize, welch_difference
from analysis.tables import metric_table, point_text, value_text

BENCH = "bench"  # the merged rows' column naming the bench that took the trial
KEPT = "kept"
BENCH_METRICS = ("energy_mj", "energy_above_idle_mj", "client_response_s", "client_cpu_s")
STARTED = "t_wall_start_ns"
_PLAN_KEYS = ("sweep", "run.seed", "run.repetitions", "run.order")


@dataclass(frozen=True)
class Duplicate:
    """A trial id with ok rows in two benches' runs: the row kept and one left out."""

    trial_id: str
    point: str
    kept: str  # bench
    dropped: str  # bench


@dataclass(frozen=True, eq=False)
class Study:
    name: str
    storage: str
    benches: tuple[tuple[str, Run], ...]  # (bench, its run), in the order given
    # Every bench's ok rows, BENCH added, in the order they started; KEPT marks the one row per
    # trial id that the merged trials hold.
    rows: pd.DataFrame
    merged: Run  # the first bench's run holding the kept rows
    duplicates: tuple[Duplicate, ...]

    @property
    def directory(self) -> Path:
        # The name is the config's run.name: kept to what a folder name can hold.
        folder = "study-" + re.sub(r"[^\w.-]", "-", self.name)
        return self.benches[0][1].path / REPORT_DIR / folder

    def rows_of(self, bench: str) -> pd.DataFrame:
        """The bench's kept rows."""
        ok = self.merged.ok
        return ok[ok[BENCH] == bench]


@dataclass(frozen=True)
class StudyFiles:
    directory: Path
    markdown: Path
    html: Path
    summary_csv: Path
    effects_csv: Path
    figures: tuple[Path, ...]


def study_bench(run: Run) -> tuple[str, str] | None:
    """(study name, bench) as the run's manifest records them; None for a run of its own."""
    study = run.manifest.get("study")
    if study is None:
        return None
    where = run.path / MANIFEST
    if not isinstance(study, Mapping):
        raise RunFormatError(f"{where}: study: expected an object, got {study!r}")
    for key in ("name", "bench"):
        if not isinstance(study.get(key), str) or not study[key]:
            raise RunFormatError(f"{where}: study.{key}: expected a name, got {study.get(key)!r}")
    return study["name"], study["bench"]


def _plan(run: Run) -> tuple[Any, ...]:
    """What every bench of a study plans alike (module doc)."""
    keys = tuple(config_value(run.manifest, key) for key in _PLAN_KEYS)
    return (run.axes, run.manifest.get("planned_trials"), *keys)


def shared_study(runs: Sequence[Run]) -> Study | None:
    """The study the runs are the benches of, merged; None when they are not one study's."""
    facts = [study_bench(run) for run in runs]
    known = [fact for fact in facts if fact is not None]
    if len(runs) < 2 or len(known) < len(runs) or len({name for name, _ in known}) > 1:
        return None
    if any(_plan(run) != _plan(runs[0]) for run in runs[1:]):
        return None
    for other in runs[1:]:
        check_comparable(runs[0], other)  # the same run given twice
    benches = [(bench, run) for (_, bench), run in zip(known, runs, strict=True)]
    seen: dict[str, Path] = {}
    for bench, run in benches:
        if bench in seen:
            raise RunFormatError(
                f"{run.path / MANIFEST}: study.bench: {bench!r} is also the bench of "
                f"{seen[bench]}; give each bench's run once"
            )
        seen[bench] = run.path
    return _merged(known[0][0], text_of(runs[0].manifest["study"].get("storage")), benches)


def _merged(name: str, storage: str, benches: Sequence[tuple[str, Run]]) -> Study:
    for bench, run in benches:
        # Rows name their bench (trials.csv's `bench`, where the run has it): the manifest's.
        named = run.ok.get(BENCH)
        if named is not None and (named.astype(str) != bench).any():
            other = named[named.astype(str) != bench].iloc[0]
            raise RunFormatError(
                f"{run.path / TRIALS}: column bench: {other!r} where the manifest's study.bench "
                f"is {bench!r}"
            )
    parts = [run.ok.assign(**{BENCH: bench}) for bench, run in benches if not run.ok.empty]
    first = benches[0][1]
    if not parts:
        raise RunFormatError(
            f"{first.path / TRIALS}: no ok rows in it nor in any other bench's trials.csv"
        )
    rows = pd.concat(parts, ignore_index=True)
    if STARTED in rows:
        rows = rows.sort_values(STARTED, kind="stable", na_position="last")
    rows = rows.reset_index(drop=True)
    rows[KEPT] = ~rows.duplicated("trial_id", keep="first")
    kept = rows[rows[KEPT]].drop(columns=KEPT)
    by_id = kept.set_index("trial_id")
    paths = {bench: run.path for bench, run in benches}
    duplicates = []
    for _, row in rows[~rows[KEPT]].iterrows():
        original = by_id.loc[row["trial_id"]]
        if any(plain(row[a]) != plain(original[a]) for a in first.axes):
            raise RunFormatError(
                f"{paths[row[BENCH]] / TRIALS}: trial {row['trial_id']} ran at "
                f"{point_text(row, first.axes)} here but at {point_text(original, first.axes)} "
                f"in {paths[original[BENCH]] / TRIALS}: not one study's plan"
            )
        duplicates.append(
            Duplicate(row["trial_id"], point_text(row, first.axes), original[BENCH], row[BENCH])
        )
    merged = replace(first, ok=kept.reset_index(drop=True))
    return Study(name, storage, tuple(benches), rows, merged, tuple(duplicates))


def bench_effects(study: Study) -> pd.DataFrame:
    """Per metric of BENCH_METRICS, point measured on two or more benches and bench: n, mean
    and CI of the bench's trials, and the effect (its mean minus the other benches') with its
    Welch interval (module doc)."""
    table, axes, confidence = study.merged.ok, list(study.merged.axes), study.merged.confidence
    metrics = [m for m in BENCH_METRICS if m in table and table[m].notna().any()]
    runs = dict(study.benches)
    rows: list[dict[str, object]] = []
    for metric in metrics:
        for key, group in table.groupby(axes, sort=True):
            point = dict(zip(axes, (plain(v) for v in key), strict=True))
            values = group.dropna(subset=[metric])
            benches = [b for b, _ in study.benches if (values[BENCH] == b).any()]
            if len(benches) < 2:
                continue
            floors = {
                bench: point_floor(runs[bench].manifest, values[values[BENCH] == bench])
                for bench in (benches if metric in ENERGY_METRICS else ())
            }
            # Each bench's own meter: an effect is bounded by the coarsest floor among them.
            known = [f.total_mj for f in floors.values() if f is not None]
            floor = max(known) if known else None
            for bench in benches:
                own = summarize(values.loc[values[BENCH] == bench, metric], confidence)
                others = summarize(values.loc[values[BENCH] != bench, metric], confidence)
                effect = welch_difference(others, own, confidence)
                seen = resolvability(others, own, floor, confidence)
                rows.append(
                    {
                        "metric": metric,
                        **point,
                        BENCH: bench,
                        "n": own.n,
                        "mean": own.mean,
                        "ci_low": own.ci_low,
                        "ci_high": own.ci_high,
                        "n_others": others.n,
                        "effect": effect.estimate,
                        "effect_ci_low": effect.ci_low,
                        "effect_ci_high": effect.ci_high,
                        "differs": effect.excludes_zero,
                        "confidence": confidence,
                        "min_detectable": seen.min_detectable,
                        "meter_floor_mj": math.nan if floor is None else floor,
                        "resolvability": seen.verdict,
                        "repetitions_needed": seen.repetitions,
                        "resolvable": seen.text(metric_of(metric).unit),
                    }
                )
    columns = ["metric", *axes, BENCH, "n", "mean", "ci_low", "ci_high", "n_others"]
    columns += ["effect", "effect_ci_low", "effect_ci_high", "differs", "confidence"]
    columns += ["min_detectable", "meter_floor_mj", "resolvability", "repetitions_needed"]
    columns += ["resolvable"]
    return pd.DataFrame(rows, columns=columns).astype({"repetitions_needed": "Int64"})


def _effect_table(effects: pd.DataFrame, axes: Sequence[str], metric: str) -> Table:
    info = metric_of(metric)
    rows = effects[effects["metric"] == metric]
    header = (
        *axes,
        "bench",
        "n",
        f"mean [CI] ({info.display_unit})",
        f"bench - others [CI] ({info.display_unit})",
        "differs",
        "resolvable",
    )
    body = tuple(
        (
            *(value_text(r[a]) for a in axes),
            str(r[BENCH]),
            str(int(r["n"])),
            interval_text(r["mean"], r["ci_low"], r["ci_high"], info.scale),
            interval_text(r["effect"], r["effect_ci_low"], r["effect_ci_high"], info.scale),
            "yes" if r["differs"] else "no",
            str(r["resolvable"]),
        )
        for _, r in rows.iterrows()
    )
    return Table(header, body, f"{info.label} ({metric}): per bench, mean [CI]")


def _idle_text(run: Run) -> str:
    # The baseline the recorder subtracted (data/README.md), not a modelled meter's own idle.
    idle = run.manifest.get("idle_baseline_mw")
    return f"{idle:.1f}" if isinstance(idle, int | float) else "-"


def _bench_rows(study: Study) -> tuple[tuple[str, ...], ...]:
    dropped = pd.Series([d.dropped for d in study.duplicates], dtype=object).value_counts()
    return tuple(
        (
            bench,
            str(run.path),
            str(len(study.rows_of(bench))),
            str(int(dropped.get(bench, 0))),
            str(len(run.failed)),
            _idle_text(run),
        )
        for bench, run in study.benches
    )


def _duplicate_blocks(study: Study) -> list[Block]:
    if not study.duplicates:
        return [Paragraph("No trial id appears in two benches' runs: each trial ran on one.")]
    return [
        Paragraph(
            f"{len(study.duplicates)} trial id(s) have ok rows in two benches' runs (a trial "
            "whose row was written just before its bench died runs again elsewhere); each is "
            "kept once, the row that started first:"
        ),
        Bullets(
            tuple(
                f"{d.trial_id} ({d.point}): kept bench {d.kept}'s row, left out bench {d.dropped}'s"
                for d in study.duplicates
            )
        ),
    ]


def _what_ran(study: Study, summary: pd.DataFrame) -> str:
    merged = study.merged
    counts = merged.ok.groupby(list(merged.axes)).size()
    low, high = int(counts.min()), int(counts.max())
    n = f"n = {low}" if low == high else f"n = {low} .. {high}"
    planned = merged.manifest.get("planned_trials")
    of = f" of {planned} planned" if isinstance(planned, int) else ""
    axes = "; ".join(
        f"{axis} {', '.join(value_text(v) for v in dict.fromkeys(summary[axis]))}"
        for axis in merged.axes
    )
    return (
        f"What ran: study {study.name} ({study.storage}), its trials shared by "
        f"{len(study.benches)} benches ({', '.join(b for b, _ in study.benches)}); the "
        f"{merged.workload} workload over {axes}; {len(merged.ok)} trials with results{of}, "
        f"{n} per point pooled over the benches, {merged.confidence * 100:g} % CIs."
    )


def _effect_blocks(study: Study, effects: pd.DataFrame, figure: Image) -> list[Block]:
    blocks: list[Block] = [Heading("The bench as a blocking factor")]
    if effects.empty:
        return [
            *blocks,
            Paragraph("No point was measured on two benches: the bench effect is not estimable."),
            figure,
        ]
    confidence = study.merged.confidence
    blocks += [
        Paragraph(
            "Each bench ran its trials on its own nodes and meter, with its own idle baseline. "
            "Per metric and point measured on two or more benches: each bench's mean with its "
            "t CI, and its effect, its mean minus the mean of the other benches' trials at "
            f"that point, with a Welch t interval at {confidence * 100:g} %; 'differs' means "
            "that interval excludes zero; 'resolvable' whether the trials could see it (above "
            "the minimum difference their n and spread detect, Welch at 80 % power) and, for "
            "energy, the coarsest of the benches' meter floors at the point, else the "
            "repetitions it would need or that none would do. Energy includes each bench's idle "
            "draw; energy above idle subtracts each bench's own baseline, so it compares the "
            "work the trials did."
        ),
        Paragraph(
            f"{int(effects['differs'].sum())} of {len(effects)} bench x point x metric effects "
            "exclude zero (bench_effects.csv holds them in the recorded units)."
        ),
        figure,
    ]
    for metric in dict.fromkeys(effects["metric"]):
        blocks.append(_effect_table(effects, study.merged.axes, metric))
    return blocks


def _image(stem: str, caption: str) -> Image:
    return Image(f"{FIGURES_DIR}/{stem}.png", f"{FIGURES_DIR}/{stem}.svg", caption)


def _figures(study: Study, summary: pd.DataFrame, target: float) -> list[tuple[str, Figure, str]]:
    merged = study.merged
    pooled = figure_client([Source(summary, merged.axes, protocols=merged.protocols)])
    per_bench = [
        Source(
            summarize_points(replace(merged, ok=study.rows_of(bench)), target),
            merged.axes,
            f"bench {bench}",
            merged.protocols,
        )
        for bench, _run in study.benches
        if not study.rows_of(bench).empty
    ]
    benches = figure_client(per_bench)
    benches.suptitle(f"Per bench: client (mean, {merged.confidence * 100:g} % t-CI)", fontsize=11)
    return [
        (
            "benches",
            benches,
            "Per bench: the means and t CIs of each bench's trials at each point (response "
            "time, CPU time, energy total and above idle), a colour per bench.",
        ),
        (
            "figure1_client",
            pooled,
            "Figure 1 (client), the benches' trials pooled: response time, CPU time, energy "
            "total and above idle.",
        ),
    ]


def write_study_report(
    study: Study,
    target_relative_half_width: float = DEFAULT_TARGET_RELATIVE_HALF_WIDTH,
    summary: pd.DataFrame | None = None,
    bench_reports: Sequence[tuple[str, str]] = (),
) -> StudyFiles:
    """Writes `study.directory`; `summary` is `summarize_points(study.merged, target)` when
    already computed; `bench_reports` are (title, href relative to this report) links to the
    benches' own reports."""
    merged, directory = study.merged, study.directory
    if summary is None:
        summary = summarize_points(merged, target_relative_half_width)
    effects = bench_effects(study)
    summary_csv, effects_csv = directory / "summary.csv", directory / "bench_effects.csv"
    write_summary_csv(summary, summary_csv)
    effects.to_csv(effects_csv, index=False, lineterminator="\n")
    columns = ["trial_id", BENCH, *merged.axes, KEPT]
    study.rows[columns].to_csv(directory / "trial_benches.csv", index=False, lineterminator="\n")
    figures = _figures(study, summary, target_relative_half_width)
    # Figures of an earlier report of this study must not outlive it.
    shutil.rmtree(directory / FIGURES_DIR, ignore_errors=True)
    paths = [p for stem, figure, _c in figures for p in save(figure, directory / FIGURES_DIR, stem)]
    images = {stem: _image(stem, caption) for stem, _figure, caption in figures}
    blocks: list[Block] = [
        Heading(f"Study report: {study.name}", 1),
        Paragraph(_what_ran(study, summary)),
        Heading("Benches"),
        Table(
            (
                "bench",
                "run",
                "trials kept",
                "ok rows left out (trial run again)",
                "failed attempts",
                "idle baseline (mW)",
            ),
            _bench_rows(study),
        ),
        *_duplicate_blocks(study),
        Paragraph(
            "trial_benches.csv lists every bench's ok rows in the order they started, with "
            "their bench and whether the merged trials keep them."
        ),
    ]
    if bench_reports:
        blocks.append(Links(tuple(bench_reports)))
    blocks += _effect_blocks(study, effects, images["benches"])
    blocks += [
        Heading("Figures"),
        images["figure1_client"],
        Heading("Tables"),
        Paragraph(
            f"Every metric over the kept trials of every bench pooled: n, mean, standard "
            f"deviation, median and a two-sided Student-t confidence interval at "
            f"{merged.confidence * 100:g} %, as a single run's report gives them. summary.csv "
            "holds the same numbers in the recorded units."
        ),
    ]
    for metric in dict.fromkeys(summary["metric"]):
        blocks.append(metric_table(summary, merged.axes, metric, target_relative_half_width))
    markdown = directory / "report.md"
    markdown.write_text(to_markdown(blocks), encoding="utf-8")
    html = directory / "report.html"
    html.write_text(to_html(blocks, f"h2iot study {study.name}", directory), encoding="utf-8")
    return StudyFiles(directory, markdown, html, summary_csv, effects_csv, tuple(paths))
