"""`h2iot plan CONFIG --pilot RUN_DIR --detect 5%`: before a sweep, how many repetitions per
point detect a difference in the client's energy, and how long the run takes.

From a pilot run (a few repetitions of the same sweep, or of some of its points), per point of
the config's grid: the pilot's mean and spread there, the difference to detect (a percentage of
the point's energy above idle, or millijoules), the floor of the config's meter over the point's
window, the repetitions a Welch test at the config's confidence needs to find the difference
with 80 % power, and the time they take at the pilot's trial time, start to start. Points whose
difference is within the meter's floor are named: no number of repetitions resolves them.

A plan needs a pilot: the repetitions follow from its spread and the run's time from its trials.
Exit status: 0 a plan was printed; 2 a config, pilot or option mistake.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from controller.cli import COMMANDS
from controller.cli._help import FORMATTER, example
from controller.config import Config
from controller.config.load import config_of, read_layers
from controller.errors import ConfigError, ControllerError

_PIPED_WIDTH = 120


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help=COMMANDS["plan"],
        description=__doc__,
        epilog=example(
            "h2iot plan configs/study.toml --pilot data/runs/h2iot-20261129T185148 --detect 5%"
        ),
        formatter_class=FORMATTER,
    )
    parser.add_argument("config", type=Path, help="the TOML config of the sweep to plan")
    parser.add_argument(
        "--pilot",
        type=Path,
        metavar="RUN_DIR",
        help="a run folder of a pilot sweep (required: the plan rests on its spread and times)",
    )
    parser.add_argument(
        "--detect",
        default="5%",
        metavar="DIFFERENCE",
        help="the difference to detect: a percentage of each point's mean energy (5%%, the "
        "default) or millijoules (20mJ)",
    )
    parser.add_argument(
        "--metric",
        default="energy_above_idle_mj",
        help="the energy the difference is in: energy_above_idle_mj (the default) or energy_mj",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (repeatable), as for h2iot sweep",
    )
    parser.add_argument("--json", action="store_true", help="the plan as JSON, for machines")
    parser.set_defaults(handler=_run)


def _checked(args: argparse.Namespace) -> Config:
    if args.pilot is None:
        raise ConfigError(
            "a plan needs a pilot run (--pilot RUN_DIR): the repetitions follow from its spread, "
            f"the run's time from its trials; record one with: h2iot sweep {args.config} "
            "--set run.repetitions=5"
        )
    config = config_of(read_layers(args.config, args.set))
    if config.search is not None:
        raise ConfigError(f"{args.config}: [search] plans its trials as it goes; plan a grid sweep")
    return config


def _run(args: argparse.Namespace) -> int:
    # Imported here: every `h2iot` command builds this parser, and only `plan` (and `report`)
    # needs pandas (the analysis extra).
    try:
        from analysis.errors import AnalysisError  # noqa: PLC0415
        from analysis.pilot import read_pilot  # noqa: PLC0415
        from analysis.plan import MeterAtPlan, parse_detect, pilot_differences, plan_run  # noqa: PLC0415
        from controller.plan.meter_record import config_meter_record  # noqa: PLC0415
        from controller.plan.view import render  # noqa: PLC0415
    except ImportError as exc:
        print(
            f"h2iot: error: plan needs the analysis extra ({exc.name} is missing): "
            "pip install 'h2iot[analysis]'",
            file=sys.stderr,
        )
        return 1
    try:
        detect = parse_detect(args.detect)
        config = _checked(args)
        meter = MeterAtPlan(config_meter_record(config), config.meter.rate_hz)
        pilot = read_pilot(args.pilot)
        # A key either run sweeps differs from point to point, not between the two runs.
        swept = (*config.sweep.names, *pilot.axes)
        plan = plan_run(
            [dict(point) for point in config.sweep.points()],
            pilot,
            detect,
            meter,
            metric=args.metric,
            confidence=config.run.confidence,
            planned_repetitions=config.run.repetitions,
            # The idle baseline before the trials, and again after them where the config asks.
            idle_s=config.run.idle_baseline_s * (2 if config.energy.idle_end else 1),
            differences=pilot_differences(pilot.config, config.to_dict(), swept),
        )
    except (AnalysisError, ControllerError) as exc:
        print(f"h2iot: error: {exc}", file=sys.stderr)
        return exc.exit_status
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        # A terminal's own width; a file or pipe gets the table's full width, never squeezed.
        Console(width=None if sys.stdout.isatty() else _PIPED_WIDTH).print(render(plan))
    return 0
