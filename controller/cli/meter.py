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
import json
import os
import shlex
import signal
import sys
import threading
import time
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.cli import COMMANDS
from controller.cli._help import FORMATTER, example
from controller.errors import ConfigError, ControllerError, MeterError
from controller.meter.calibrate import measure_zero, suspicious_channels
from controller.meter.calibration import (
    ACS712_SENSITIVITY_MV_PER_A,
    Calibration,
    nominal,
)
from controller.meter.node_power import ModelledMeterOptions, WatchSpec
from controller.meter.power_model import PI_3B, PowerModel
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ, VDD_MAX_MV, VDD_MIN_MV
from controller.meter.ppk2.modelled import ModelledPpk2, ModelledPpk2Source
from controller.meter.protocol import McuId
from controller.meter.sensor import Acs712
from controller.meter.session import DEFAULT_BAUD, MeterSession
from controller.meter.simulate import SimulatedMeter, SimulateOptions
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions

if TYPE_CHECKING:
    from controller.energy import WindowEnergy
    from controller.meter.jls.run import SweepRules, TrialWindow

DEFAULT_CALIBRATION = Path("meter-calibration.json")
IMPORT_DESCRIPTION = """\
Import a Joulescope recording into a run recorded with the client's trial marker wired
to the Joulescope's GPI0. Each marker pulse is matched in order to the run's trials
(count, durations and spacing must agree, or nothing is written and the first mismatch
is named); each trial then gets its power trace and energy as a live meter gives them,
the idle power measured in the recording before the first trial. A run that already has
energy (another meter's) is refused unless --replace. Needs pyjls: the 'joulescope' extra."""
VARIANTS = tuple(ACS712_SENSITIVITY_MV_PER_A)
DEVICES = ("arduino", "ppk2")
_ERROR_POLL_S = 0.1  # how often a serving emulated PPK2 is asked whether its thread failed


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "meter",
        help=COMMANDS["meter"],
        description=__doc__,
        epilog=example("h2iot meter read --port /dev/ttyACM0"),
        formatter_class=FORMATTER,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    info = actions.add_parser(
        "info",
        help="the board's identity and configuration",
        epilog=example("h2iot meter info --port /dev/ttyACM0 --json"),
        formatter_class=FORMATTER,
    )
    _port_options(info)
    info.add_argument("--json", action="store_true", help="print the INFO fields as JSON")
    info.set_defaults(handler=_info)

    read = actions.add_parser(
        "read",
        help="live power and a link summary",
        epilog=example(
            "h2iot meter read --port /dev/ttyACM0 --seconds 30 --calibration meter-calibration.json"
        ),
        formatter_class=FORMATTER,
    )
    _port_options(read)
    read.add_argument("--seconds", type=float, default=5.0, help="how long (default 5)")
    read.add_argument("--rate", type=int, metavar="HZ", help="set the sample rate first")
    read.add_argument("--channels", metavar="MASK", help="set the inputs first: 0x03 or A0,A1")
    read.add_argument("--interval", type=float, default=1.0, help="seconds per live line")
    _calibration_options(read)
    read.set_defaults(handler=_read)

    calibrate = actions.add_parser(
        "calibrate",
        help="measure the zero offset with no load",
        epilog=example("h2iot meter calibrate --port /dev/ttyACM0 --out meter-calibration.json"),
        formatter_class=FORMATTER,
    )
    _port_options(calibrate)
    _sensor_options(calibrate)
    calibrate.add_argument("--seconds", type=float, default=2.0, help="measuring time")
    calibrate.add_argument(
        "--out", type=Path, default=DEFAULT_CALIBRATION, help=f"default {DEFAULT_CALIBRATION}"
    )
    calibrate.set_defaults(handler=_calibrate)

    virtual = actions.add_parser(
        "virtual",
        help="a pty speaking the meter protocol, powered by a Pi 3B model of watched processes",
        epilog=example("h2iot meter virtual --watch-pid 4242 --duration 60 --truth truth.csv"),
        formatter_class=FORMATTER,
    )
    _model_options(virtual)
    virtual.add_argument("--truth", type=Path, help="write the modelled power (CSV) here")
    virtual.add_argument(
        "--tick-s", type=float, default=0.01, help="CPU measuring period (default 0.01)"
    )
    virtual.add_argument(
        "--device",
        choices=DEVICES,
        default="arduino",
        help="what the pty is: the Arduino sketch's protocol (default) or a Nordic PPK2 (the "
        "first watched source, --supply-v its supply, 0.8-5 V)",
    )
    virtual.add_argument(
        "--marker-input",
        type=int,
        default=0,
        metavar="N",
        help="with --device ppk2: the logic input D0-D7 the marker FIFO sets (default 0)",
    )
    virtual.add_argument(
        "--rate-hz",
        type=int,
        default=1000,
        help="with --device ppk2: the rate --truth is written at, the bins a reader averages "
        f"the {SAMPLE_RATE_HZ} S/s stream into (a divisor of it; default 1000)",
    )
    virtual.set_defaults(handler=_virtual)

    simulate = actions.add_parser(
        "simulate",
        help="the real firmware in simavr (firmware/sim), its ADC fed by the same power model",
        epilog=example("h2iot meter simulate --watch-pid 4242 --duration 60"),
        formatter_class=FORMATTER,
    )
    _model_options(simulate)
    simulate.add_argument("--truth", type=Path, help="write the modelled power (CSV) here")
    simulate.add_argument(
        "--tick-s", type=float, default=0.01, help="input and pacing period (default 0.01)"
    )
    simulate.set_defaults(handler=_simulate)

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


def _port_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", required=True, help="serial device: board, virtual or sim pty")
    parser.add_argument("--baud", type=int, default=DEFAULT_BAUD, help="default 500000")


def _sensor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", choices=VARIANTS, default="5A", help="ACS712 part")
    parser.add_argument("--supply-v", type=float, default=5.0, help="node supply (default 5.0)")


def _calibration_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--calibration", type=Path, help="calibration file (default: nominal for --variant)"
    )
    _sensor_options(parser)


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--watch-pid",
        dest="watch",
        action="append",
        type=lambda text: f"pid:{text}",
        default=[],
        metavar="PID",
        help="a node's process (its whole tree); the n-th watched source drives input An",
    )
    parser.add_argument(
        "--watch",
        dest="watch",
        action="append",
        metavar="SPEC",
        help="pid:PID or cgroup:PATH (v1 or v2 cgroup directory), in input order with --watch-pid",
    )
    parser.add_argument(
        "--marker-fifo",
        type=Path,
        help="FIFO of marker edges: 'LEVEL MONO_NS' lines (agent --marker fifo:PATH) or bare 1/0",
    )
    parser.add_argument("--no-load", action="store_true", help="zero current (to calibrate)")
    parser.add_argument("--zero-offset-mv", type=float, default=0.0, help="sensor offset error")
    parser.add_argument("--idle-mw", type=float, default=PI_3B.idle_mw, help="model at idle")
    parser.add_argument("--full-mw", type=float, default=PI_3B.full_mw, help="at full load")
    parser.add_argument("--cores", type=int, default=PI_3B.cores, help="modelled board's cores")
    parser.add_argument(
        "--network-nj-per-byte",
        type=float,
        default=PI_3B.network_nj_per_byte,
        help="the model's network term, per byte on --net-interface (0: none)",
    )
    parser.add_argument(
        "--net-interface",
        metavar="IFACE",
        help="the watched nodes' network interface, whose traffic drives the network term "
        "(lo is counted once per frame); default: no network term",
    )
    parser.add_argument("--seed", type=int, help="noise seed (default: random)")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    _sensor_options(parser)


# --- handlers -------------------------------------------------------------------------------


def _info(args: argparse.Namespace) -> int:
    try:
        with _session(args) as meter:
            info = meter.identify()
    except ControllerError as exc:
        return _fail(exc)
    if args.json:
        print(json.dumps(asdict(info), indent=2))
        return 0
    mcu = McuId(info.mcu_id).name if info.mcu_id in set(McuId) else f"MCU {info.mcu_id}"
    inputs = ", ".join(
        [f"A{n}" for n in info.channels] + [f"INA219@{a:#04x}" for a in info.i2c_addresses]
    )
    print(f"board         {info.board} ({mcu}, {info.f_cpu_hz / 1e6:g} MHz) on {args.port}")
    print(f"firmware      {info.fw_version}, protocol {info.protocol_version}")
    print(f"ADC           {info.adc_bits} bits, reference {info.adc_ref_mv} mV")
    print(f"sampling      {info.sample_rate_hz} Hz, {inputs}, oversampling {info.oversampling}")
    print(f"link          {info.baud} baud; marker on digital pin {info.marker_pin}")
    return 0


def _read(args: argparse.Namespace) -> int:
    try:
        with _session(args) as meter:
            info = meter.identify()
            if args.rate is not None:
                meter.set_rate(args.rate)
            if args.channels is not None:
                meter.set_channels(_mask(args.channels))
            info = meter.identify()
            calibration = _load_calibration(args, info.channels)
            for n in info.channels:
                calibration.channel(n)
            meter.start()
            shown = 0
            started = time.monotonic()
            while (elapsed := time.monotonic() - started) < args.seconds:
                time.sleep(min(args.interval, max(0.0, args.seconds - elapsed)))
                end = meter.samples.next_index
                _live_line(meter, calibration, info.channels, shown, end)
                shown = end
            try:
                final = meter.stop()
            except MeterError:
                # A board that sent nothing after START may not answer STOP either: the
                # samples that never came are what the user needs to hear about.
                if not meter.samples.received:
                    raise _no_samples(meter, args.seconds) from None
                raise
            health = meter.health()
            window = meter.samples.all()
            if not len(window.indices):
                raise _no_samples(meter, args.seconds)
            jumped = meter.samples.jumped_frames
    except ControllerError as exc:
        return _fail(exc)
    print(f"-- {args.port}: {info.board}, {info.sample_rate_hz} Hz configured")
    for column, n in enumerate(info.channels):
        power = calibration.power_mw(window.values[:, column], n)
        if len(power):
            energy = float(power.sum()) / info.sample_rate_hz
            print(
                f"A{n}  mean {power.mean():8.1f} mW  min {power.min():8.1f}  "
                f"max {power.max():8.1f}  energy {energy:10.1f} mJ"
            )
    received = len(window.indices)
    taken, dropped = final.samples_taken, final.samples_dropped
    # The board's counters and what arrived can disagree (a confused board): no count printed
    # goes below 0, and the disagreement is said in words.
    missing = max(0, taken - received)
    print(
        f"samples       {taken} taken, {received} received, {missing} missing: "
        f"{dropped} dropped by the meter (link too slow), "
        f"{max(0, missing - dropped)} lost on the link"
    )
    if taken < received or dropped > missing:
        print(
            f"note          the board's counters ({taken} taken, {dropped} dropped) disagree "
            f"with the {received} samples received"
        )
    achieved = received / health.elapsed_s
    print(f"sample rate   {achieved:.1f} Hz achieved over {health.elapsed_s:.2f} s")
    refused = f", {jumped} frames with implausible sample indices ignored" if jumped else ""
    print(
        f"link          {health.crc_failures} CRC failures, {health.frames_missed} frames missed "
        f"(sequence gaps), {health.bytes_discarded} bytes discarded{refused}"
    )
    return 0


def _no_samples(meter: MeterSession, seconds: float) -> MeterError:
    return MeterError(f"meter on {meter.name}: no samples arrived in {seconds:g} s after START")


def _calibrate(args: argparse.Namespace) -> int:
    try:
        with _session(args) as meter:
            calibration = measure_zero(meter, args.seconds, args.variant, args.supply_v)
        calibration.save(args.out)
    except ControllerError as exc:
        return _fail(exc)
    except OSError as exc:
        return _fail(ConfigError(f"--out {args.out}: cannot write: {exc.strerror}"))
    for channel in calibration.channels:
        zero_mv = channel.zero_code * calibration.lsb_mv
        print(
            f"A{channel.analog_input}: zero {channel.zero_code:.2f} codes ({zero_mv:.1f} mV), "
            f"noise {channel.zero_noise_code:.2f} codes, {channel.zero_samples} samples"
        )
    for channel in suspicious_channels(calibration):
        print(
            f"h2iot: warning: A{channel.analog_input} zero is far from mid-scale: "
            "was a load connected?",
            file=sys.stderr,
        )
    print(f"calibration ({args.variant}, {args.supply_v:g} V) written to {args.out}")
    return 0


def _modelled(args: argparse.Namespace) -> dict[str, Any]:
    """The options the virtual and the simulated meter share, from their common flags."""
    return {
        "watch": tuple(
            replace(WatchSpec.parse(spec), interface=args.net_interface) for spec in args.watch
        ),
        "truth_path": args.truth,
        "marker_fifo": args.marker_fifo,
        "model": _model(args),
        "sensor": Acs712(args.variant, args.supply_v, zero_offset_mv=args.zero_offset_mv),
        "no_load": args.no_load,
        "tick_s": args.tick_s,
        "seed": args.seed,
    }


def _virtual(args: argparse.Namespace) -> int:
    if args.device == "ppk2":
        return _virtual_ppk2(args)
    try:
        meter: VirtualMeter | SimulatedMeter = VirtualMeter(VirtualMeterOptions(**_modelled(args)))
    except ControllerError as exc:
        return _fail(exc)
    return _serve_meter(meter, args.duration)


def _ppk2(args: argparse.Namespace) -> ModelledPpk2:
    """The emulated PPK2 the flags describe, driven by the model of the first watched source."""
    supply_mv = round(args.supply_v * 1000)
    if not VDD_MIN_MV <= supply_mv <= VDD_MAX_MV:
        raise ConfigError(f"--supply-v {args.supply_v:g}: a PPK2 supplies 0.8-5 V")
    if not 0 <= args.marker_input <= 7:
        raise ConfigError(f"--marker-input {args.marker_input}: a PPK2 has inputs D0-D7")
    if not 0 < args.rate_hz <= SAMPLE_RATE_HZ or SAMPLE_RATE_HZ % args.rate_hz:
        raise ConfigError(f"--rate-hz {args.rate_hz}: must divide {SAMPLE_RATE_HZ}")
    if len(args.watch) > 1:
        raise ConfigError("--device ppk2: a PPK2 measures one node, watch one source")
    options = ModelledMeterOptions(**_modelled(args))
    source = ModelledPpk2Source(options, supply_mv, args.marker_input, rate_hz=args.rate_hz)
    return ModelledPpk2(source)


def _virtual_ppk2(args: argparse.Namespace) -> int:
    """Print the emulated PPK2's pty, serve until SIGINT/SIGTERM or the duration, close: the
    emulator serves from its own thread, so this one only waits, and says why it failed."""
    try:
        meter = _ppk2(args)
    except ControllerError as exc:
        return _fail(exc)
    stopped = threading.Event()
    _serve(stopped.set, args.duration)
    try:
        meter.start()
        print(meter.port, flush=True)
        while not stopped.wait(_ERROR_POLL_S):
            if meter.error is not None:
                raise meter.error
    except ControllerError as exc:
        return _fail(exc)
    finally:
        meter.close()
    return 0


def _simulate(args: argparse.Namespace) -> int:
    try:
        meter: VirtualMeter | SimulatedMeter = SimulatedMeter(SimulateOptions(**_modelled(args)))
    except ControllerError as exc:
        return _fail(exc)
    return _serve_meter(meter, args.duration)


def _serve_meter(meter: VirtualMeter | SimulatedMeter, duration: float | None) -> int:
    """Print the pty, serve until SIGINT/SIGTERM or the duration, close."""
    _serve(meter.request_stop, duration)  # before the port is out: a client may stop us
    print(meter.port, flush=True)
    try:
        meter.run()
    except ControllerError as exc:
        return _fail(exc)
    finally:
        meter.close()
    return 0


def _import(args: argparse.Namespace) -> int:
    # Imported here: the import pulls in pyjls (an optional extra) and the sweep's modules.
    from controller.meter.jls.pulses import Tolerance  # noqa: PLC0415
    from controller.meter.jls.run import ImportOptions, import_recording  # noqa: PLC0415

    if args.duration_tolerance_s < 0 or args.spacing_tolerance_s < 0:
        return _fail(ConfigError("--duration-tolerance-s/--spacing-tolerance-s: must be >= 0"))
    if args.idle_mw is not None and args.idle_mw < 0:
        return _fail(ConfigError("--idle-mw: must be 0 or more"))
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
        return _fail(exc)
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


def _session(args: argparse.Namespace) -> MeterSession:
    if not os.path.exists(args.port):
        raise ConfigError(f"--port {args.port}: no such device")
    return MeterSession.open(args.port, args.baud)


def _serve(stop: Any, duration: float | None) -> None:
    """SIGINT/SIGTERM (and --duration) end a serving command cleanly."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop())
    if duration is not None:
        timer = threading.Timer(duration, stop)
        timer.daemon = True
        timer.start()


def _model(args: argparse.Namespace) -> PowerModel:
    if args.cores < 1 or args.full_mw < args.idle_mw or args.idle_mw < 0:
        raise ConfigError("--idle-mw/--full-mw/--cores: need 0 <= idle <= full and cores >= 1")
    if args.network_nj_per_byte < 0:
        raise ConfigError("--network-nj-per-byte: must be 0 or more")
    return PowerModel(
        args.idle_mw, args.full_mw, args.cores, network_nj_per_byte=args.network_nj_per_byte
    )


def _mask(text: str) -> int:
    try:
        if text.upper().startswith("A"):
            return sum(1 << int(part.strip()[1:]) for part in text.split(","))
        return int(text, 0)
    except ValueError:
        raise ConfigError(
            f"--channels {text!r}: expected a mask (0x03) or inputs (A0,A1)"
        ) from None


def _load_calibration(args: argparse.Namespace, inputs: tuple[int, ...]) -> Calibration:
    if args.calibration is not None:
        return Calibration.load(args.calibration)
    return nominal(inputs, args.variant, args.supply_v)


def _live_line(
    meter: MeterSession, calibration: Calibration, inputs: tuple[int, ...], first: int, end: int
) -> None:
    window = meter.samples.window(first, end)
    if not len(window.indices):
        print(f"t {first}..{end}: no samples")
        return
    parts = [
        f"A{n} {calibration.power_mw(window.values[:, c], n).mean():8.1f} mW"
        for c, n in enumerate(inputs)
    ]
    health = meter.health()
    print(
        f"sample {end:>8}  " + "  ".join(parts) + f"  ({health.sample_rate_hz:.0f} Hz, "
        f"{health.crc_failures} CRC, {health.frames_missed} gaps)",
        flush=True,
    )


def _fail(exc: ControllerError) -> int:
    print(f"h2iot: error: {exc}", file=sys.stderr)
    return exc.exit_status
