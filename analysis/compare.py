"""Two runs side by side (two engines, two link profiles, ...): `<base>/report/compare-<other>/`.

Points are matched on the swept settings; per metric and point the table gives each run's mean
and CI and the difference other - base with a Welch t interval at the base run's confidence. A
difference "differs" when that interval excludes zero. The config keys whose values differ are
listed first, since they are what the comparison is about.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.bounds import bounds_of
from analysis.columns import metric_of
from analysis.differences import compare_summaries, interval_text
from analysis.document import Block, Heading, Image, Links, Paragraph, Table, to_html, to_markdown
from analysis.errors import ComparisonError
from analysis.facts import emulated_core_fractions, flatten, manifest_facts, text_of
from analysis.figures import (
    Source,
    figure_client,
    figure_cpu_pct,
    figure_frames,
    figure_server,
    save,
    window_note,
)
from analysis.load import Run, require_results
from analysis.points import metric_rows, per_emulated_core, plain
from analysis.report import FIGURES_DIR, REPORT_DIR, emulated_cores_caption
from analysis.study import Check, study_checks
from analysis.tables import value_text

_PROVENANCE = ("source", "layers", "origins")  # where values came from, not what they are


@dataclass(frozen=True)
class ComparisonFiles:
    directory: Path
    markdown: Path
    html: Path
    csv: Path
    figures: tuple[Path, ...]


def comparison_dir(base: Run, other: Run) -> Path:
    return base.path / REPORT_DIR / f"compare-{other.name}"


def check_comparable(base: Run, other: Run) -> None:
    if base.path.resolve() == other.path.resolve():
        raise ComparisonError(f"{base.path}: the same run given twice")
    if base.axes != other.axes:
        raise ComparisonError(
            f"{other.path / 'manifest.json'}: axes {list(other.axes)} differ from "
            f"{base.path / 'manifest.json'}'s {list(base.axes)}; only runs sweeping the same "
            "settings can be compared"
        )


def unmatched_points(
    base_summary: pd.DataFrame, other_summary: pd.DataFrame, axes: Sequence[str]
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    def points(summary: pd.DataFrame) -> set[tuple[object, ...]]:
        return {tuple(plain(v) for v in p) for p in summary[list(axes)].itertuples(index=False)}

    base, other = points(base_summary), points(other_summary)
    return sorted(base - other), sorted(other - base)


def config_differences(base: Run, other: Run) -> list[tuple[str, str, str]]:
    """(dotted key, base value, other value) for config and software keys that differ."""

    def leaves(run: Run) -> dict[str, Any]:
        config = {k: v for k, v in run.config.items() if k not in _PROVENANCE}
        found = {f"config.{k}": v for k, v in flatten(config)}
        found |= {k: v for k, v in flatten({"software": run.manifest.get("software")})}
        return found

    a, b = leaves(base), leaves(other)
    return [
        (key, text_of(a.get(key)), text_of(b.get(key)))
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key)
    ]


def _side(row: pd.Series, side: str, scale: float) -> str:
    interval = interval_text(
        row[f"mean_{side}"], row[f"ci_low_{side}"], row[f"ci_high_{side}"], scale
    )
    return f"{interval} (n {row[f'n_{side}']})"


def _metric_table(
    table: pd.DataFrame, axes: Sequence[str], metric: str, names: tuple[str, str]
) -> Table:
    info = metric_of(metric)
    rows = metric_rows(table, metric)
    header = (
        *axes,
        f"{names[0]} ({info.display_unit})",
        f"{names[1]} ({info.display_unit})",
        f"{names[1]} - {names[0]}",
        "relative",
        "differs",
        "resolvable",
    )
    body = tuple(
        (
            *(value_text(r[a]) for a in axes),
            _side(r, "base", info.scale),
            _side(r, "other", info.scale),
            interval_text(
                r["difference"], r["difference_ci_low"], r["difference_ci_high"], info.scale
            ),
            "-" if math.isnan(r["relative"]) else f"{r['relative'] * 100:+.1f} %",
            "yes" if r["differs"] else "no",
            r["resolvable"],
        )
        for _, r in rows.iterrows()
    )
    return Table(header, body, f"{info.label} ({metric}): mean [CI]")


def write_comparison(
    base: Run, base_summary: pd.DataFrame, other: Run, other_summary: pd.DataFrame
) -> ComparisonFiles:
    check_comparable(base, other)
    require_results(base)
    require_results(other)
    directory = comparison_dir(base, other)
    names = (base.name, other.name)
    confidence = base.confidence
    table = compare_summaries(base_summary, other_summary, base.axes, confidence)
    csv_path = directory / "comparison.csv"
    directory.mkdir(parents=True, exist_ok=True)
    table.to_csv(csv_path, index=False, lineterminator="\n")

    sources = [
        Source(base_summary, base.axes, names[0], base.protocols),
        Source(other_summary, other.axes, names[1], other.protocols),
    ]
    bounds = [bounds_of(base), bounds_of(other)]
    # Figure 3: each run's emulated nodes in percent of their emulated core.
    per_run = list(
        zip(sources, (emulated_core_fractions(base), emulated_core_fractions(other)), strict=True)
    )
    cores = [replace(s, summary=per_emulated_core(s.summary, f)) for s, f in per_run]
    emulated = [f"{role} ({s.label})" for s, f in per_run for role in f]
    cores_caption = "".join(f" {s.label}:{emulated_cores_caption(f)}" for s, f in per_run if f)
    figures = [
        (
            "figure1_client",
            figure_client(sources, bounds),
            "Figure 1 (client), both runs." + window_note((*base.protocols, *other.protocols)),
        ),
        ("figure2_server", figure_server(sources, bounds), "Figure 2 (server), both runs."),
        (
            "figure3_cpu_pct",
            figure_cpu_pct(cores, emulated),
            "Figure 3: CPU %, both runs." + cores_caption,
        ),
    ]
    frames = figure_frames(sources)
    if frames is not None:
        figures.append(("frames_per_byte", frames, "Frames per byte, both runs."))
    paths: list[Path] = []
    shutil.rmtree(directory / FIGURES_DIR, ignore_errors=True)
    for stem, figure, _caption in figures:
        paths.extend(save(figure, directory / FIGURES_DIR, stem))

    only_base, only_other = unmatched_points(base_summary, other_summary, base.axes)
    blocks: list[Block] = [
        Heading(f"Comparison: {names[0]} vs {names[1]}", 1),
        Paragraph(
            f"Per metric and swept point: each run's mean with its t-based CI, and the "
            f"difference {names[1]} - {names[0]} with a Welch t interval at "
            f"{confidence * 100:g} % (the confidence of {names[0]}). 'differs' means that "
            "interval excludes zero; 'resolvable' whether the runs could see it: above the "
            "minimum difference their n and spread detect (Welch, 80 % power), and for energy "
            "above the meter's floor (one step held over the point's median trial plus the "
            "noise averaged over its samples, the larger of the two runs'), else the "
            "repetitions per point it would need or that no number of them resolves it."
        ),
        *_floor_warning(table),
        Links(
            (
                (
                    f"report of {names[0]}",
                    os.path.relpath(base.path / REPORT_DIR / "report.html", directory),
                ),
                (
                    f"report of {names[1]}",
                    os.path.relpath(other.path / REPORT_DIR / "report.html", directory),
                ),
            )
        ),
        Heading("What differs between the runs"),
        Table(
            ("key", names[0], names[1]),
            tuple(config_differences(base, other)) or (("(nothing)", "", ""),),
        ),
        Heading("The runs"),
        _facts_table(base, other, names),
    ]
    if only_base or only_other:
        blocks.append(
            Paragraph(
                f"Points in one run only (not compared): {names[0]}: {only_base or 'none'}; "
                f"{names[1]}: {only_other or 'none'}."
            )
        )
    blocks += [
        Heading("Against the study's findings"),
        _checks_table(base, base_summary, other, other_summary, names),
        Heading("Figures"),
        *(
            Image(f"{FIGURES_DIR}/{stem}.png", f"{FIGURES_DIR}/{stem}.svg", caption)
            for stem, _f, caption in figures
        ),
        Heading("Tables"),
    ]
    for metric in dict.fromkeys(table["metric"]):
        blocks.append(_metric_table(table, base.axes, metric, names))
    markdown = directory / "report.md"
    markdown.write_text(to_markdown(blocks), encoding="utf-8")
    html = directory / "report.html"
    html.write_text(
        to_html(blocks, f"h2iot: {names[0]} vs {names[1]}", directory), encoding="utf-8"
    )
    return ComparisonFiles(directory, markdown, html, csv_path, tuple(paths))


def _floor_warning(table: pd.DataFrame) -> list[Block]:
    """The comparisons the meter cannot support, counted where a reader starts."""
    below = table[table["resolvability"] == "below_meter_floor"] if not table.empty else table
    if below.empty:
        return []
    metrics = ", ".join(dict.fromkeys(below["metric"]))
    return [
        Paragraph(
            f"Read with care: {len(below)} differences ({metrics}) are below the meter's floor "
            f"(up to {below['meter_floor_mj'].max():.3g} mJ): the meters cannot tell the runs "
            "apart at those points, whatever the repetitions."
        )
    ]


def _facts_table(base: Run, other: Run, names: tuple[str, str]) -> Table:
    a, b = dict(manifest_facts(base)), dict(manifest_facts(other))
    keys = list(dict.fromkeys([*a, *b]))
    return Table(("fact", *names), tuple((k, a.get(k, "-"), b.get(k, "-")) for k in keys))


def _checks_table(
    base: Run,
    base_summary: pd.DataFrame,
    other: Run,
    other_summary: pd.DataFrame,
    names: tuple[str, str],
) -> Table:
    a, b = (
        {
            (c.finding, c.series): c
            for c in study_checks(summary, run.axes, run.confidence, emulated_core_fractions(run))
        }
        for run, summary in ((base, base_summary), (other, other_summary))
    )

    def cell(check: Check | None) -> str:
        if check is None:
            return "-"
        resolvable = f"; {check.resolvable}" if check.resolvable else ""
        return f"{check.measured} [{check.verdict}]{resolvable}"

    rows = []
    for key in dict.fromkeys([*a, *b]):
        finding, series = key
        study = (a.get(key) or b[key]).study
        rows.append(
            (
                f"{finding} ({series})" if series else finding,
                study,
                cell(a.get(key)),
                cell(b.get(key)),
            )
        )
    return Table(("finding", "study", *names), tuple(rows))
