"""`h2iot meter info|read|calibrate|virtual|simulate|import`: the current meter from the command
line.

info, read and calibrate talk to any meter port: a board (/dev/ttyACM0), the virtual meter's
pty or the simulator's. virtual and simulate make such a port and print its path as their
first line on stdout, then serve until interrupted (SIGINT/SIGTERM) or --duration passes.
`virtual --device ppk2` makes an emulated Nordic PPK2 instead (its USB serial protocol, 100 kS/s
sample words, the marker FIFO on a logic input), for ppk2-api or any PPK2 client to open.
import reads a Joulescope recording (JLS v2) made during a sweep, its trial marker on GPI0,
into the run: each trial's trace and energy (docs/joulescope.md).
"""

from __future__ import annotations

import argparse
import importlib
import shlex
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.cli import COMMANDS
from controller.cli._help import FORMATTER, example
from controller.cli._meter import fail
from controller.config.meter_sources import SPECS
from controller.errors import ConfigError, ControllerError

if TYPE_CHECKING:
    from controller.energy import WindowEnergy
    from controller.meter.jls.run import SweepRules, TrialWindow

IMPORT_DESCRIPTION = """\
Import a Joulescope recording into a run recorded with the client's trial marker wired
to the Joulescope's GPI0. Each marker pulse is matched in order to the run's trials
(count, durations and spacing must agree, or nothing is written and the first mismatch
is named); each trial then gets its power trace and energy as a live meter gives them,
the idle power measured in the recording before the first trial. A run that already has
energy (another meter's) is refused unless --replace. Needs pyjls: the 'joulescope' extra."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "meter",
        help=COMMANDS["meter"],
        description=__doc__,
        epilog=example("h2iot meter read --port /dev/ttyACM0"),
        formatter_class=FORMATTER,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    # Each meter source's verbs are in its folder (the `cli` its declaration names), in the
    # registry's order; `import`, the Joulescope's (no sweep source), is this module's.
    for spec in SPECS.values():
        if spec.cli is not None:
            importlib.import_module(spec.cli).register(actions)

    recording = actions.add_parser(
        "import",
        help="a Joulescope recording (JLS v2, marker on GPI0) into a run: trace and energy",
        description=IMPORT_DESCRIPTION,
        epilog=example(
            "h2iot meter import data/runs/h2iot-20261129T185148 ~/joulescope/sweep.jls --replace"
        ),
        formatter_class=FORMATTER,
    )
    recording.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run folder")
    recording.add_argument(
        "recording", type=Path, metavar="RECORDING.jls", help="the Joulescope UI's recording"
    )
    recording.add_argument(
        "--replace",
        action="store_true",
        help="overwrite the energy the run already has (another meter's); refused without it",
    )
    recording.add_argument(
        "--idle-mw",
        type=float,
        metavar="MW",
        help="idle power to subtract (default: the recording's, before the first trial)",
    )
    recording.add_argument(
        "--marker", default="gpi[0]", help="the marker's signal in the recording (default gpi[0])"
    )
    recording.add_argument(
        "--duration-tolerance-s",
        type=float,
        default=0.005,
        metavar="S",
        help="a pulse may last this much (+ 2 %%) more or less than its trial (default 0.005)",
    )
    recording.add_argument(
        "--spacing-tolerance-s",
        type=float,
        default=0.05,
        metavar="S",
        help="and start this much (+ 1 %%) off its trial's time after the previous (default 0.05)",
    )
    recording.set_defaults(handler=_import)


def _import(args: argparse.Namespace) -> int:
    # Imported here: the import pulls in pyjls (an optional extra) and the sweep's modules.
    from controller.meter.jls.pulses import Tolerance  # noqa: PLC0415
    from controller.meter.jls.run import ImportOptions, import_recording  # noqa: PLC0415

    if args.duration_tolerance_s < 0 or args.spacing_tolerance_s < 0:
        return fail(ConfigError("--duration-tolerance-s/--spacing-tolerance-s: must be >= 0"))
    if args.idle_mw is not None and args.idle_mw < 0:
        return fail(ConfigError("--idle-mw: must be 0 or more"))
    options = ImportOptions(
        replace=args.replace,
        idle_mw=args.idle_mw,
        tolerance=Tolerance(
            duration_abs_s=args.duration_tolerance_s, spacing_abs_s=args.spacing_tolerance_s
        ),
        marker=args.marker,
    )
    try:
        result = import_recording(args.run_dir, args.recording, sweep_rules(), options)
    except ControllerError as exc:
        return fail(exc)
    energies = [trial.energy_mj for trial in result.trials]
    lost = sum(trial.samples_lost for trial in result.trials)
    span = f"{min(energies):.3f} .. {max(energies):.3f} mJ" if energies else "no ok trials"
    print(
        f"{result.recording}: {result.instrument} at {result.rate_hz:g} Hz, "
        f"{result.pulses} marker pulses matched to the run's trials"
    )
    print(
        f"{len(result.trials)} trials with energy ({span}), idle {result.idle_mw:.1f} mW "
        f"({'from the recording' if result.idle_source == 'recording' else '--idle-mw'})"
        + (f", {result.replaced} trials' earlier energy replaced" if result.replaced else "")
        + (f", {lost} samples lost" if lost else "")
    )
    print(f"report: h2iot report {shlex.quote(str(result.run_dir))}")
    return 0


def sweep_rules() -> SweepRules:
    """The sweep's own rules for an import (controller.meter.jls.run.SweepRules): the idle
    baseline's judgement, and the meter's cells of a row exactly as the sweep engine fills them
    (`trial_row` with the window and energy, less what it fills without them)."""
    from controller.config.model import Config  # noqa: PLC0415
    from controller.meter.jls.run import SweepRules  # noqa: PLC0415
    from controller.sweep.baseline import judge  # noqa: PLC0415
    from controller.sweep.interfaces import PowerWindow  # noqa: PLC0415
    from controller.sweep.plan import PlannedTrial  # noqa: PLC0415
    from controller.sweep.rows import trial_row  # noqa: PLC0415

    def meter_cells(window: TrialWindow, energy: WindowEnergy) -> dict[str, object]:
        power = PowerWindow(
            **{
                f.name: getattr(window, f.name)
                for f in fields(PowerWindow)
                if f.init and hasattr(window, f.name)
            }
        )
        planned = PlannedTrial("t", 0, 0, 1, Config().point(()))
        bare = trial_row(planned, 1, error=None, client=None, server=None, power=None, energy=None)
        full = trial_row(
            planned, 1, error=None, client=None, server=None, power=power, energy=energy
        )
        return {key: value for key, value in full.items() if key not in bare}

    return SweepRules(judge_idle=judge, meter_cells=meter_cells)


# --- helpers --------------------------------------------------------------------------------
