"""`h2iot sweep CONFIG`: run a sweep (or resume one) and record it under data/runs/<run-id>/.

Exit status: 0 every planned trial has a result; 1 some trials failed all their attempts;
2 a config or usage mistake; 3 the sweep paused (a lost node or meter, or Ctrl-C); 4 the run's
disk is full. Resume with `h2iot sweep --resume RUN_DIR`: the run records its config layers
(the file as it read, the --set overrides), so the run directory alone continues it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shlex
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from agent import __version__
from agent.protocols import protocol_spec
from agent.workloads import spec_of
from analysis.columns import BREAKDOWN
from analysis.conditions import summarise as summarise_conditions
from analysis.manifest import read_manifest
from analysis.meter_floor import resolution_record
from analysis.trial_columns import workload_columns
from controller.cli import COMMANDS
from controller.cli._help import FORMATTER, example
from controller.config import DEFAULT_CONFIG_PATH, Config
from controller.config.load import Layer, config_of, read_layers, with_overrides
from controller.config.model import OptimizeConfig, TrialPoint
from controller.dashboard.live import LiveDashboard, MeterWatch, PlainLines, Sink
from controller.dashboard.state import Notice, SweepStarted
from controller.errors import ConfigError, ControllerError
from controller.run.recorder import RunRecorder, manifest_to_resume, read_trials
from controller.sweep import baseline
from controller.sweep.engine import StopRule, SweepEngine, SweepOutcome
from controller.sweep.errors import MeterLost, NodeLost
from controller.sweep.optimize_run import OptimizeRun
from controller.sweep.plan import PlannedTrial, plan_sweep
from controller.sweep.search_run import (
    BreakdownRun,
    first_point,
    search_axes,
    trials_bound,
)
from controller.sweep.setup import open_sweep
from controller.sweep.shared import SharedStudy, StudyOptions, study_facts

EXIT_FAILED_TRIALS = 1
EXIT_PAUSED = 3
# What must match between a run's manifest and the config it is resumed with.
_PLAN_KEYS = (
    ("run", "seed"),
    ("run", "repetitions"),
    ("run", "order"),
    ("sweep",),
    ("workload",),
    ("energy", "window"),
    ("search",),
)


@dataclass(frozen=True)
class _Sweep:
    config: Config
    layers: tuple[Layer, ...]  # what `config` was built from, above the built-in defaults
    plan: list[PlannedTrial]
    axes: tuple[str, ...]
    run_dir: Path
    resumed: dict[str, Any] | None  # the manifest of the run being resumed
    study: StudyOptions | None = None  # the study this bench shares with others (--study)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help=COMMANDS["sweep"],
        description=__doc__,
        epilog=example("h2iot sweep configs/local.toml --set run.repetitions=2"),
        formatter_class=FORMATTER,
    )
    parser.add_argument(
        "config",
        nargs="?",
        type=Path,
        help=f"TOML config (default {DEFAULT_CONFIG_PATH}; with --resume, the run's own "
        "recorded config, --set overrides stacking on it)",
    )
    parser.add_argument("--out", type=Path, default=Path("data/runs"), help="where runs go")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue this run")
    parser.add_argument("--no-dashboard", action="store_true", help="plain lines, no live view")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (repeatable), e.g. run.repetitions=3",
    )
    parser.add_argument(
        "--study",
        metavar="URL",
        help="share the sweep's trials with other benches through optuna's storage at this "
        "SQLAlchemy URL (sqlite:///FILE, postgresql+psycopg://USER@HOST/DB; the study extra): "
        "each bench takes trials until none is left, its rows in its own run",
    )
    parser.add_argument(
        "--bench",
        default=platform.node(),
        help="with --study: this bench's name in its run's manifest (default: the host name)",
    )
    parser.add_argument(
        "--heartbeat",
        type=int,
        default=10,
        metavar="S",
        help="with --study: how often a bench says it is still at its trial; a trial silent "
        "for 3 x S is taken again by another bench (default 10)",
    )
    parser.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="record an SSH node's unknown host key (printing its fingerprint)",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # Plain lines are for logs: never wrapped at the terminal width.
    console = Console(soft_wrap=True)
    try:
        sweep = _prepare(args)
        sink: Sink = PlainLines(console) if args.no_dashboard else LiveDashboard(console)
        stop = threading.Event()
        previous = signal.signal(signal.SIGINT, lambda *_: _interrupt(stop, sink))
        try:
            outcome = _measure(sweep, sink, stop, accept_new_host_key=args.accept_new_host_key)
        except ControllerError:
            _discard_if_empty(sweep)
            raise
        finally:
            signal.signal(signal.SIGINT, previous)
            sink.close()
    except ControllerError as exc:
        print(f"h2iot: error: {exc}", file=sys.stderr)
        return exc.exit_status
    return _conclude(console, outcome, sweep.run_dir)


def _discard_if_empty(sweep: _Sweep) -> None:
    """A new run that failed before its first trial leaves no directory behind."""
    if sweep.resumed is None and sweep.run_dir.exists() and not read_trials(sweep.run_dir):
        shutil.rmtree(sweep.run_dir, ignore_errors=True)


def _prepare(args: argparse.Namespace) -> _Sweep:
    manifest = None if args.resume is None else manifest_to_resume(args.resume)
    if manifest is None or args.config is not None:
        layers = read_layers(args.config or DEFAULT_CONFIG_PATH, args.set)
    else:
        layers = with_overrides(_recorded_layers(manifest, args.resume), args.set)
    config = config_of(layers)
    if config.search is None:
        plan = plan_sweep(config)
        axes = tuple(config.sweep.names)
    elif isinstance(config.search, OptimizeConfig):  # it plans as it goes, over the grid's axes
        plan, axes = [], tuple(config.sweep.names)
    else:  # the search plans as it goes (controller.sweep.search_run)
        plan, axes = [], search_axes(config)
    if args.resume is None:
        run_dir = args.out / f"{config.run.name}-{time.strftime('%Y%m%dT%H%M%S')}"
        return _Sweep(config, layers, plan, axes, run_dir, None, _study(args, config))
    assert manifest is not None
    # A run stopped before its manifest held the config (by an h2iot that wrote it only after
    # the idle baseline) measured nothing: it continues with the config given now.
    if "config" in manifest or read_trials(args.resume):
        _check_resumable(manifest, config, args.resume)
    return _Sweep(config, layers, plan, axes, args.resume, manifest, _study(args, config))


def _study(args: argparse.Namespace, config: Config) -> StudyOptions | None:
    """--study's options, refusing what a shared sweep cannot do in one line."""
    if args.study is None:
        return None
    if config.search is not None:
        raise ConfigError("--study: a search plans its trials as it goes; share a grid sweep")
    if config.run.stop_half_width is not None:
        raise ConfigError(
            "--study: run.stop_half_width stops a point on one bench's trials alone; unset it"
        )
    if args.heartbeat < 1:
        raise ConfigError(f"--heartbeat {args.heartbeat}: at least 1 s")
    if not args.bench.strip():
        raise ConfigError("--bench: a bench needs a name")
    return StudyOptions(args.study, args.bench, args.heartbeat, 3 * args.heartbeat)


def _recorded_layers(manifest: dict[str, Any], run_dir: Path) -> tuple[Layer, ...]:
    where = f"{run_dir / 'manifest.json'}"
    recorded = manifest.get("config_layers")
    if not isinstance(recorded, list):
        raise ConfigError(
            f"{where}: records no config layers (a run started by an older h2iot): give its "
            f"config file and --set options too: h2iot sweep CONFIG [--set ...] --resume {run_dir}"
        )
    return tuple(Layer.from_dict(record, where) for record in recorded)


def _check_resumable(manifest: dict[str, Any], config: Config, run_dir: Path) -> None:
    recorded = manifest.get("config", {})
    current = config.to_dict()
    for path in _PLAN_KEYS:
        before: Any = recorded
        now: Any = current
        for key in path:
            before = before.get(key) if isinstance(before, dict) else None
            now = now.get(key) if isinstance(now, dict) else None
        if before != now:
            raise ConfigError(
                f"{run_dir}: {'.'.join(path)} was {before!r} in this run, the config says "
                f"{now!r}: a resumed run keeps its plan"
            )


def _interrupt(stop: threading.Event, sink: Sink) -> None:
    if stop.is_set():
        raise KeyboardInterrupt
    stop.set()
    sink.post(Notice("Ctrl-C: pausing after the current trial (again to abort it)"))


def _software() -> dict[str, str]:
    import h2  # noqa: PLC0415  (versions of what measured, for the manifest)
    import numpy  # noqa: PLC0415

    return {
        "h2iot": __version__,
        "python": platform.python_version(),
        "h2": h2.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }


def local_time_zone() -> str:
    """The controller's zone, for the report's times: its IANA name (TZ, else what
    /etc/localtime links to), else its current UTC offset as "+HH:MM"."""
    name = os.environ.get("TZ", "").removeprefix(":")
    if not name:
        with contextlib.suppress(OSError):
            target = os.readlink("/etc/localtime")
            name = target.partition("zoneinfo/")[2]
    if name:
        return name
    offset = time.strftime("%z")
    return f"{offset[:3]}:{offset[3:]}"


def _manifest(sweep: _Sweep) -> dict[str, Any]:
    """What the manifest says before anything is measured: enough to resume the run from its
    directory alone (the config, and the layers it was built from)."""
    config = sweep.config
    return {
        "run_id": sweep.run_dir.name,
        "created_wall_ns": time.time_ns(),
        "time_zone": local_time_zone(),
        "axes": list(sweep.axes),
        "workload": _workload_facts(config),
        "config": config.to_dict(),
        "config_layers": [layer.to_dict() for layer in sweep.layers],
        "software": _software(),
        "planned_trials": _planned(sweep),
        **({} if sweep.study is None else {"study": study_facts(sweep.study, config.run.name)}),
    }


def _planned(sweep: _Sweep) -> int:
    """The plan's trials; a search's most."""
    search = sweep.config.search
    if search is None:
        return len(sweep.plan)
    return search.budget if isinstance(search, OptimizeConfig) else trials_bound(sweep.config)


def _first_point(config: Config) -> TrialPoint:
    """Where a search's server starts (the idle baseline's)."""
    if isinstance(config.search, OptimizeConfig):
        return config.point(config.sweep.points()[0])
    return first_point(config)


def _recorder(sweep: _Sweep, sink: Sink) -> tuple[RunRecorder, dict[str, Any]]:
    """The run's recorder, and its manifest as this session leaves it. A resumed run's
    manifest records this session's layers (what `--resume RUN_DIR` alone continues with)."""
    kind = sweep.config.workload.kind
    search = sweep.config.search is not None
    quic = any(protocol_spec(p).quic for p in sweep.config.protocols)
    bench = None if sweep.study is None else sweep.study.bench
    manifest = _manifest(sweep)
    if sweep.resumed is None:
        recorder = RunRecorder.create(
            sweep.run_dir, sweep.axes, manifest, kind, search, quic=quic, bench=bench
        )
        return recorder, manifest
    study = sweep.resumed.get("study")
    if bench is None and isinstance(study, dict):  # a bench's run resumed on its own
        bench = study.get("bench")
    recorder = RunRecorder(sweep.run_dir, sweep.axes, kind, search, quic, bench=bench)
    recorded = {key: value for key, value in sweep.resumed.items() if key != "format_version"}
    merged = {**manifest, **recorded, "config_layers": manifest["config_layers"]}
    if merged != recorded:
        recorder.write_manifest(merged)
    lost = recorder.ok_without_trace()
    if lost:
        # Recorded before the trace was written first: the rows stand (their energy came from
        # the trace), flagged here and counted by the report.
        recorder.event("traces_missing", trial_ids=lost)
        sink.post(Notice(f"{len(lost)} ok rows have no power trace: {', '.join(lost[:10])}"))
    return recorder, merged


def _measure(
    sweep: _Sweep, sink: Sink, stop: threading.Event, *, accept_new_host_key: bool
) -> SweepOutcome:
    config, plan = sweep.config, sweep.plan
    recorder, manifest = _recorder(sweep, sink)
    done = sum(1 for row in recorder.rows() if row["status"] == "ok")
    try:
        # Joined before anything is measured: a study that cannot be joined costs no baseline.
        shared = None if sweep.study is None else SharedStudy(sweep.study, config.run.name, plan)
        recorder.check_space()
        with open_sweep(config, sweep.run_dir, accept_new_host_key=accept_new_host_key) as opened:
            nodes, meter, facts = opened
            if "idle_baseline_mw" not in manifest:
                # A new run, or one stopped before its baseline: nothing measured yet.
                nodes.ensure_server(plan[0].point if plan else _first_point(config))
                rtt_s = nodes.measure_rtt_s()
                idle = baseline.before_sweep(meter, config, sink.post, recorder)
                idle_mw = idle.baseline.mean_mw
                manifest.update(
                    facts,
                    idle_baseline_mw=idle_mw,
                    idle_baseline_s=config.run.idle_baseline_s,
                    idle_baseline=idle.facts(),
                    energy_window=config.energy.window,
                    rtt_s=rtt_s,
                )
                recorder.write_manifest(manifest)
            else:
                idle_mw = float(manifest["idle_baseline_mw"])
            if sweep.resumed is not None:
                layers = [layer.to_dict() for layer in sweep.layers]
                recorder.event("sweep_resumed", **facts, config_layers=layers)
            sink.post(SweepStarted(str(sweep.run_dir), _planned(sweep), done, sweep.axes,
                                   config.run.confidence, time.monotonic()))  # fmt: skip
            watch = MeterWatch(meter, sink)
            try:
                engine = SweepEngine(
                    recorder=recorder,
                    nodes=nodes,
                    meter=meter,
                    idle_mw=idle_mw,
                    retries=config.run.retries,
                    trial_timeout_s=config.run.trial_timeout_s,
                    post=sink.post,
                    stop=stop,
                    stop_rule=_stop_rule(config),
                    energy_window=config.energy.window,
                    # This session's meter (facts) over what an earlier one recorded.
                    meter_resolution=resolution_record({**manifest, **facts}),
                )
                if shared is not None:
                    outcome = engine.run(plan, shared)
                elif config.search is None:
                    outcome = engine.run(plan)
                elif isinstance(config.search, OptimizeConfig):
                    outcome = OptimizeRun(engine, config, sink.post).run()
                else:
                    outcome = BreakdownRun(engine, config, sink.post).run()
                if outcome.paused is None and config.energy.idle_end:
                    baseline.after_sweep(meter, config, sink.post, recorder)
                # The nodes' conditions over every ok trial so far (after_sweep's write kept).
                ok_rows = [row for row in recorder.rows() if row["status"] == "ok"]
                recorded = read_manifest(recorder.run_dir)
                recorder.write_manifest({**recorded, "conditions": summarise_conditions(ok_rows)})
                return outcome
            finally:
                watch.close()
    except (MeterLost, NodeLost) as exc:
        recorder.check_space()  # a node or meter lost to a full disk: the disk is the news
        reason = f"{type(exc).__name__}: {exc}"
        recorder.event("sweep_paused", reason=reason)
        return SweepOutcome(done, (), max(_planned(sweep) - done, 0), reason)
    finally:
        recorder.close()


def _workload_facts(config: Config) -> dict[str, Any]:
    """The manifest's `workload`: the kind, the columns it adds, with units (the report
    summarises them beside the common metrics), and its declaration's facts about several
    client nodes (the parameter spread over them, the field weighing their merged means)."""
    spec = spec_of(config.workload.kind)
    return {
        "kind": config.workload.kind,
        "columns": [column.described() for column in workload_columns(config.workload.kind)],
        "spread_param": spec.spread_param,
        "count_field": spec.count_field,
    }


def _stop_rule(config: Config) -> StopRule | None:
    run = config.run
    if run.stop_half_width is None:
        return None
    return StopRule(run.stop_metric, run.stop_half_width, run.stop_min_n, run.confidence)


def _conclude(console: Console, outcome: SweepOutcome, run_dir: Path) -> int:
    def say(text: str) -> None:
        console.print(text, highlight=False)

    console.line()  # the live view's last frame may end without one
    say(f"run: {run_dir}")
    say(f"{outcome.completed} trials with results, {outcome.remaining} to go")
    if outcome.stopped_early:
        say(f"{outcome.stopped_early} trials not needed: their points settled early")
    if outcome.paused is not None:
        say(f"paused: {outcome.paused}")
        say(f"resume: h2iot sweep --resume {shlex.quote(str(run_dir))}")
        return EXIT_PAUSED
    if outcome.failed_trials:
        say(f"failed after every attempt: {', '.join(outcome.failed_trials)}")
        return EXIT_FAILED_TRIALS
    if (run_dir / BREAKDOWN).exists():
        say(f"breakdown: {run_dir / BREAKDOWN}")
    say(f"report: h2iot report {shlex.quote(str(run_dir))}")
    return 0
