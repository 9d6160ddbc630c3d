"""One run's report: `<run>/report/` with report.md, report.html, summary.csv and figures/.

Layout of the report, findings first:
- the first screen (`analysis.opening`): what ran in one sentence, the warnings that change how
  to read the results (`analysis.caveats`), the headline figure and the findings: the study
  comparison for the page workload, a workload's own result section or headline metric for
  the others, a breakdown search's table for a search (`analysis.findings`);
- the comparison links and the other result sections;
- the other figures (Figures 1-3 of the study with the flow-control and link bounds, power
  traces, frames per byte, memory, the workload's own, the per-frame model's fit), the
  energy by phase (`analysis.phases`), the per-frame cost model (`analysis.energy_report`),
  one table per metric;
- at the end, folded in the HTML: the run's facts (manifest, trial accounting, events), the
  nodes' conditions, the client nodes, the idle baseline, the modelled meter's ground truth,
  the manifest's other keys, the sample size, outliers and missing values.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from analysis.agreement import agreement
from analysis.bounds import Bounds, bounds_of
from analysis.caveats import caveats
from analysis.clients import read_side_table
from analysis.clients import report_blocks as clients_blocks
from analysis.columns import WINDOW_AXIS
from analysis.conditions import report_blocks as conditions_blocks
from analysis.differences import floor_blocks
from analysis.document import (
    Block,
    Bullets,
    Heading,
    Image,
    Links,
    Paragraph,
    Table,
    folded,
    to_html,
    to_markdown,
)
from analysis.energy_report import (
    frame_model_blocks,
    idle_blocks,
    meter_blocks,
    residuals_table,
    truth_blocks,
)
from analysis.event_costs import EventFit, event_cost_blocks, fit_events
from analysis.event_costs import summary_rows as event_cost_rows
from analysis.facts import (
    emulated_core_fractions,
    event_counts,
    failure_reasons,
    idle_power_mw,
    manifest_facts,
    other_manifest_facts,
    representative_trials,
    trial_facts,
)
from analysis.figures import (
    Source,
    Trace,
    figure_client,
    figure_cpu_pct,
    figure_frame_model,
    figure_frames,
    figure_memory,
    figure_power,
    figure_server,
    figure_workload,
    save,
    window_note,
)
from analysis.findings import arrange, headline_figure, headline_of
from analysis.frame_model import Fit, fit_run, summary_rows
from analysis.load import Run, load_power, require_results
from analysis.opening import first_screen, what_ran
from analysis.optimize import FIGURE_STEM as SEARCH_STEM
from analysis.optimize import figure_search
from analysis.phases import STEMS as PHASE_STEMS
from analysis.phases import phase_blocks, phase_figures, representatives
from analysis.points import (
    DEFAULT_TARGET_RELATIVE_HALF_WIDTH,
    per_emulated_core,
    summarize_points,
)
from analysis.qlog_counts import client_marks
from analysis.stats import cochran_sample_size
from analysis.tables import metric_table, point_text
from analysis.workloads.base import HEADLINE_STEM, report_of

REPORT_DIR = "report"
FIGURES_DIR = "figures"


@dataclass(frozen=True)
class ReportFiles:
    directory: Path
    markdown: Path
    html: Path
    summary_csv: Path
    figures: tuple[Path, ...]  # PNG and SVG of every figure


def write_summary_csv(summary: pd.DataFrame, path: Path) -> None:
    """summary.csv: metric, the swept settings, n, mean, sd, ci_low, ci_high, confidence, then
    median, relative_half_width, reps_needed, outliers, missing; values in the recorded units.
    The per-frame cost model's coefficients follow as `frame_model:*` rows (estimate as mean,
    standard error as sd, the swept settings empty), then the costs per event as `event_cost:*`
    rows (the same, with the series' category axes set)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    summary.to_csv(path, index=False, lineterminator="\n")


def sample_size_blocks(summary: pd.DataFrame, axes: Sequence[str], target: float) -> list[Block]:
    needed = summary.dropna(subset=["reps_needed"])
    short = needed[needed["reps_needed"] > needed["n"]]
    blocks: list[Block] = [
        Heading("Sample size"),
        Paragraph(
            f"The study's 68 fetches per setting are Cochran's infinite-population size "
            f"z² p (1 - p) / e² at 90 % confidence, p = 0.5, e = 0.10: "
            f"{cochran_sample_size(0.90, 0.10)}. Per point, the tables below give the repetitions "
            f"this run's spread needs for a CI half-width of ±{target * 100:g} % of the mean, "
            f"(z sd / ({target:g} mean))²."
        ),
    ]
    if short.empty:
        blocks.append(Paragraph(f"Every point has enough repetitions for ±{target * 100:g} %."))
    else:
        worst = short.sort_values("reps_needed", ascending=False).iloc[0]
        blocks.append(
            Paragraph(
                f"{len(short)} of {len(needed)} metric x point cells have fewer repetitions than "
                f"±{target * 100:g} % needs; the largest need is {int(worst['reps_needed'])} "
                f"({worst['metric']} at {point_text(worst, axes)})."
            )
        )
    return blocks


def outlier_blocks(summary: pd.DataFrame) -> list[Block]:
    per_metric = summary.groupby("metric", sort=False)[["outliers", "missing", "n"]].sum()
    rows = tuple(
        (metric, str(int(r["n"])), str(int(r["outliers"])), str(int(r["missing"])))
        for metric, r in per_metric.iterrows()
    )
    return [
        Heading("Outliers and missing values"),
        Paragraph(
            "No value is dropped: every ok row enters every statistic. Values outside Tukey's "
            "fences (1.5 x IQR beyond the quartiles of their point) are only counted; empty cells "
            "(a metric the trial could not measure) are counted as missing."
        ),
        Table(("metric", "values", "outside Tukey's fences", "missing"), rows),
    ]


def _traces(run: Run) -> tuple[list[Trace], list[str]]:
    traces: list[Trace] = []
    missing: list[str] = []
    for trial_id, title in representative_trials(run):
        trace = load_power(run, trial_id)
        if trace is None or trace.shape[0] == 0:
            missing.append(trial_id)
            continue
        traces.append(Trace(title, trace[:, 0], trace[:, 1]))
    return traces, missing


def emulated_cores_caption(fractions: dict[str, float]) -> str:
    """What Figure 3's caption adds when nodes were emulated (per_emulated_core drew them)."""
    if not fractions:
        return ""
    quotas = ", ".join(f"{role} {fraction:.3g}" for role, fraction in sorted(fractions.items()))
    return (
        " An emulated node is drawn in percent of its emulated core, as the study's Pi numbers "
        f"are: its CPU % of the host's core divided by its CPU quota ({quotas}); summary.csv "
        "keeps the host's."
    )


def _figures(
    run: Run, summary: pd.DataFrame, bounds: Bounds, grid: Run | None = None
) -> tuple[list[tuple[str, Figure, str]], list[str]]:
    source = Source(summary, run.axes, protocols=run.protocols)
    fractions = emulated_core_fractions(run)
    notes: list[str] = []
    own = report_of(run.workload)
    # The bounds are the page's window sweep's: other runs draw and caption none.
    drawn = [bounds] if own.bounds and WINDOW_AXIS in run.axes else []
    caption = (
        "Figure 1 (client): response time with the flow-control and link bounds, CPU time, "
        "energy total and above idle. " + bounds.caption() + "."
        if drawn
        else "Figure 1 (client): response time, CPU time, energy total and above idle."
    ) + window_note(run.protocols)
    figures: list[tuple[str, Figure, str]] = [
        ("figure1_client", figure_client([source], drawn), caption),
        (
            "figure2_server",
            figure_server([source], drawn),
            "Figure 2 (server): response (serve) time"
            + (" with the same bounds" if drawn else "")
            + ", CPU time.",
        ),
        (
            "figure3_cpu_pct",
            figure_cpu_pct(
                [replace(source, summary=per_emulated_core(summary, fractions))],
                sorted(fractions),
            ),
            "Figure 3: CPU time / response time, client and server, percent of one core."
            + emulated_cores_caption(fractions),
        ),
    ]
    traces, missing = _traces(run)
    power = figure_power(traces, idle_power_mw(run))
    if power is not None:
        figures.append(
            (
                "power_traces",
                power,
                "Client power during representative trials (at each window shown, the trial "
                "whose energy is nearest its point's median); dashed: idle baseline.",
            )
        )
    if missing and not traces:
        notes.append("No power traces saved for the representative trials: figure omitted.")
    elif missing:
        notes.append(f"No power trace saved for {', '.join(missing)}.")
    frames = figure_frames([source])
    if frames is not None:
        figures.append(
            (
                "frames_per_byte",
                frames,
                "DATA frames received and WINDOW_UPDATE frames sent by the client, per byte "
                "received: the per-frame work behind the CPU cost of small windows.",
            )
        )
    else:
        notes.append("No frame counters in this run: frames-per-byte figure omitted.")
    figures.append(
        ("memory", figure_memory([source]), "Peak resident set size, client and server.")
    )
    figures += own.figures(run, summary, source)
    marked = {
        str(row["trial_id"]): client_marks(run.path, str(row["trial_id"]), row["t_wall_start_ns"])
        for _point, row in representatives(run)
    }
    phased, phase_notes = phase_figures(run, source, marked)
    figures += phased
    notes += phase_notes
    headline = headline_of(run)
    lead = figure_workload([source], run.workload, headline.draws) if headline.draws else None
    if lead is not None:
        figures.insert(0, (HEADLINE_STEM, lead, headline.caption))
    search = figure_search(run, grid)
    if search is not None:
        figures.insert(0, (SEARCH_STEM, search, SEARCH_CAPTION))
    return figures, notes


SEARCH_CAPTION = (
    "The optimizing search: the best mean so far against the trials it used (the grid's best "
    "and its interval shaded, when a grid run was given), or, for two objectives, every point "
    "it measured with the Pareto front marked."
)


def _image(stem: str, caption: str, lead: bool = False) -> Image:
    return Image(f"{FIGURES_DIR}/{stem}.png", f"{FIGURES_DIR}/{stem}.svg", caption, lead)


def appendix_blocks(
    run: Run,
    *,
    summary: pd.DataFrame,
    target: float,
    truth: pd.DataFrame | None,
    client_nodes: Sequence[Mapping[str, str]],
) -> list[Block]:
    """The run's facts and the detail behind its warnings, each section folded in HTML."""
    trials: list[Block] = [Heading("Trials"), Table(("fact", "value"), tuple(trial_facts(run)))]
    reasons = failure_reasons(run)
    if reasons:
        trials += [
            Paragraph("Why attempts failed (retried where the config allowed):"),
            Bullets(tuple(reasons)),
        ]
    events = event_counts(run)
    if events:
        trials += [
            Paragraph("Events logged (events.jsonl):"),
            Table(("event", "count"), tuple(events)),
        ]
    other = other_manifest_facts(run)
    sections: list[Sequence[Block]] = [
        [Heading("The run"), Table(("fact", "value"), tuple(manifest_facts(run)))],
        trials,
        conditions_blocks(run.ok.to_dict("records")),
        clients_blocks(client_nodes),
        meter_blocks(run),
        floor_blocks(summary, run.axes),
        idle_blocks(run),
        truth_blocks(truth),
        [Heading("Manifest (besides the config)"), Table(("key", "value"), tuple(other))]
        if other
        else [],
        sample_size_blocks(summary, run.axes, target),
        outlier_blocks(summary),
    ]
    return [block for section in sections for block in folded(section)]


def build_blocks(
    run: Run,
    *,
    summary: pd.DataFrame,
    figure_entries: Sequence[tuple[str, str]],
    notes: Sequence[str],
    target: float,
    comparisons: Sequence[tuple[str, str]],
    fits: Sequence[Fit] = (),
    event_fits: Sequence[EventFit] = (),
    truth: pd.DataFrame | None = None,
    client_nodes: Sequence[Mapping[str, str]] = (),
    grid: Run | None = None,
) -> list[Block]:
    """The report, findings first (module doc). `figure_entries`: (stem, caption) of each
    figure drawn; `truth`: the modelled meter's agreement table; `client_nodes`:
    trial_clients.csv's rows (analysis.clients), for a run of several."""
    lead = headline_figure(run, [stem for stem, _caption in figure_entries])
    findings, sections = arrange(run, summary, target, grid, event_fits)
    blocks = first_screen(
        run,
        sentence=what_ran(run, client_nodes),
        caveats=caveats(run, client_nodes=client_nodes, truth=truth, summary=summary),
        figure=next(
            (_image(stem, caption, True) for stem, caption in figure_entries if stem == lead),
            None,
        ),
        findings=findings,
    )
    if comparisons:
        blocks += [Heading("Comparisons"), Links(tuple(comparisons))]
    blocks += sections
    blocks += [
        Heading("Figures"),
        *(
            _image(stem, caption)
            for stem, caption in figure_entries
            if stem != lead and stem not in PHASE_STEMS
        ),
    ]
    if notes:
        blocks.append(Bullets(tuple(notes)))
    phase_images = {
        stem: _image(stem, caption) for stem, caption in figure_entries if stem in PHASE_STEMS
    }
    blocks += phase_blocks(run, summary, phase_images)
    blocks += frame_model_blocks(fits)
    blocks += event_cost_blocks(run, event_fits)
    blocks += [
        Heading("Tables"),
        Paragraph(
            f"Every metric: n, mean, standard deviation, median and a two-sided Student-t "
            f"confidence interval at {run.confidence * 100:g} % (the run's confidence), over the "
            f"ok rows of trials.csv. summary.csv holds the same numbers in the recorded units."
        ),
    ]
    for metric in dict.fromkeys(summary["metric"]):
        blocks.append(metric_table(summary, run.axes, metric, target))
    blocks += appendix_blocks(
        run, summary=summary, target=target, truth=truth, client_nodes=client_nodes
    )
    return blocks


def write_report(
    run: Run,
    target_relative_half_width: float = DEFAULT_TARGET_RELATIVE_HALF_WIDTH,
    comparisons: Sequence[tuple[str, str]] = (),
    summary: pd.DataFrame | None = None,
    grid: Run | None = None,
) -> ReportFiles:
    """Writes `<run>/report/`; `comparisons` are (title, href relative to the report) links;
    `summary` is `summarize_points(run, target_relative_half_width)` when already computed;
    `grid`: a grid run of an optimizing search's space, to check what it found against."""
    require_results(run)
    client_nodes = read_side_table(run.path)  # checked before anything is written
    directory = run.path / REPORT_DIR
    figures_dir = directory / FIGURES_DIR
    if summary is None:
        summary = summarize_points(run, target_relative_half_width)
    per_unit = report_of(run.workload).per_unit
    if per_unit is not None:
        summary = pd.concat([summary, per_unit.rows(run)], ignore_index=True)
    bounds = bounds_of(run)
    fits = fit_run(run)
    event_fits = fit_events(run)
    summary_csv = directory / "summary.csv"
    write_summary_csv(
        pd.concat([summary, summary_rows(fits, run.axes), event_cost_rows(event_fits, run.axes)]),
        summary_csv,
    )
    residuals_table(fits).to_csv(
        directory / "frame_model_residuals.csv", index=False, lineterminator="\n"
    )
    figures, notes = _figures(run, summary, bounds, grid)
    fitted = figure_frame_model(fits)
    if fitted is not None:
        figures.append(
            (
                "frame_model",
                fitted,
                "Per-frame cost model: each trial's measured energy above idle and CPU time "
                "against what its frames, bytes and duration predict (dashed: equality).",
            )
        )
    # Figures of an earlier report of this run (say, a power figure it no longer has) must go.
    shutil.rmtree(figures_dir, ignore_errors=True)
    paths: list[Path] = []
    for stem, figure, _caption in figures:
        paths.extend(save(figure, figures_dir, stem))
    blocks = build_blocks(
        run,
        summary=summary,
        figure_entries=[(stem, caption) for stem, _figure, caption in figures],
        notes=notes,
        target=target_relative_half_width,
        comparisons=comparisons,
        fits=fits,
        event_fits=event_fits,
        truth=agreement(run),
        client_nodes=client_nodes,
        grid=grid,
    )
    markdown = directory / "report.md"
    markdown.write_text(to_markdown(blocks), encoding="utf-8")
    html = directory / "report.html"
    html.write_text(to_html(blocks, f"h2iot run {run.name}", directory), encoding="utf-8")
    return ReportFiles(directory, markdown, html, summary_csv, tuple(paths))
