"""The engine's bookkeeping (retries, resume, pauses) with in-process stand-ins for the nodes
and the meter; the end-to-end tests run it with real agents and real meters."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from controller.config.model import Config, TrialPoint
from controller.dashboard.state import DashboardEvent, TrialFinished
from controller.meter.calibration import nominal
from controller.meter_sources.board.resolution import acs712
from controller.run.recorder import RunRecorder, read_trials
from controller.sweep.engine import StopRule, SweepEngine
from controller.sweep.errors import NodeLost
from controller.sweep.interfaces import PowerWindow
from controller.sweep.plan import plan_trials

AXES = ("initial_window_size",)
POWER_MW = 2000.0
IDLE_MW = 1200.0
# What the board's tap records of the default ACS712-5A channel (manifest meter.resolution).
ACS712_RECORD = acs712(nominal(), 0, 1000, 104.0).to_dict()


def windows(*sizes: int) -> list[TrialPoint]:
    """Grid points of the default config sweeping the stream window alone."""
    return [Config().point((("initial_window_size", size),)) for size in sizes]


class StandInNodes:
    def __init__(self, fail_first: set[str], lose_at: str | None = None) -> None:
        self.fail_first = set(fail_first)
        self.lose_at = lose_at
        self.server_settings: list[dict[str, int]] = []
        self.clock_ns = 1_000_000_000_000

    def facts(self) -> Mapping[str, Any]:
        return {}

    def ensure_server(self, point: TrialPoint) -> None:
        self.server_settings.append(dict(point.settings))

    def run_trial(self, trial_id: str, point: TrialPoint, timeout_s: float) -> dict[str, Any]:
        if trial_id == self.lose_at:
            raise NodeLost("client: ssh connection reset", role="client")
        start = self.clock_ns
        self.clock_ns += 500_000_000
        if trial_id in self.fail_first:
            self.fail_first.discard(trial_id)
            return {"ok": False, "error": "GET /img/photo-1.jpg: sha256 differs from the manifest"}
        return {
            "ok": True,
            "error": None,
            "t_wall_start_ns": start,
            "t_wall_end_ns": self.clock_ns,
            "response_s": 0.5,
            "cpu_s": 0.1,
            "cpu_pct": 20.0,
            "rss_peak_bytes": 1,
            "received": {"bytes": 10, "frames": {"DATA": 3}},
            "sent": {"bytes": 5, "frames": {"WINDOW_UPDATE": 2}},
        }

    def server_trial(self, trial_id: str, timeout_s: float) -> dict[str, Any] | None:
        return {
            "ok": True,
            "serve_s": 0.4,
            "cpu_s": 0.05,
            "cpu_pct": 12.5,
            "rss_peak_bytes": 2,
            "sent": {"bytes": 10, "frames": {"DATA": 3}},
        }

    def client_clock_offset_ns(self) -> int:
        return 0

    def trial_events(self, trial_id: str) -> dict[str, bytes]:
        return {}

    def close(self) -> None:
        pass


class ConstantMeter:
    source = "stand-in"

    def facts(self) -> Mapping[str, Any]:
        return {}

    def idle_baseline_mw(self, seconds: float) -> float:
        return IDLE_MW

    def begin_trial(self) -> None:
        pass

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        start, end = start_wall_ns / 1e9 - before_s, end_wall_ns / 1e9 + after_s
        t = np.arange(start - 0.01, end + 0.01, 0.001)
        return PowerWindow(t, np.full_like(t, POWER_MW), start, end, "clock", 0, 0, 0, 0)

    def health(self) -> tuple[float, int, int, int]:
        return (1000.0, 0, 0, 0)

    def close(self) -> None:
        pass


def stand_in_engine(
    recorder: RunRecorder,
    nodes: StandInNodes,
    post: Callable[[DashboardEvent], None] = lambda event: None,
) -> SweepEngine:
    """An engine over stand-in nodes and a constant meter: one retry, a 10 s trial timeout."""
    return SweepEngine(
        recorder=recorder,
        nodes=nodes,
        meter=ConstantMeter(),
        idle_mw=IDLE_MW,
        retries=1,
        trial_timeout_s=10,
        post=post,
    )


def _engine(run: Path, nodes: StandInNodes) -> SweepEngine:
    if (run / "manifest.json").exists():
        recorder, _manifest = RunRecorder.resume(run)
    else:
        recorder = RunRecorder.create(run, AXES, {"axes": list(AXES)})
    return stand_in_engine(recorder, nodes)


def test_failed_attempt_is_recorded_and_retried_then_energy_is_integrated(tmp_path: Path) -> None:
    plan = plan_trials(windows(256, 65535), 2, "randomized-blocked", seed=3)
    first = plan[0].trial_id
    outcome = _engine(tmp_path / "run", StandInNodes({first})).run(plan)
    assert (outcome.completed, outcome.remaining, outcome.paused) == (4, 0, None)
    rows = read_trials(tmp_path / "run")
    assert [(r["trial_id"], r["attempt"], r["status"]) for r in rows[:2]] == [
        (first, "1", "failed"),
        (first, "2", "ok"),
    ]
    assert "sha256 differs" in rows[0]["error"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 4
    for row in ok:
        assert float(row["energy_mj"]) == pytest.approx(POWER_MW * 0.5)
        assert float(row["energy_above_idle_mj"]) == pytest.approx((POWER_MW - IDLE_MW) * 0.5)
        assert row["client_data_frames"] == "3"
        assert (tmp_path / "run" / "power" / f"{row['trial_id']}.npy").exists()


def test_lost_node_pauses_and_resume_finishes_without_duplicates(tmp_path: Path) -> None:
    plan = plan_trials(windows(256, 1024, 65535), 2, "sequential", seed=1)
    outcome = _engine(tmp_path / "run", StandInNodes(set(), lose_at=plan[3].trial_id)).run(plan)
    assert outcome.paused is not None and "ssh connection reset" in outcome.paused
    assert (outcome.completed, outcome.remaining) == (3, 3)
    resumed = _engine(tmp_path / "run", StandInNodes(set())).run(plan)
    assert (resumed.completed, resumed.remaining, resumed.paused) == (6, 0, None)
    ids = [r["trial_id"] for r in read_trials(tmp_path / "run")]
    assert ids == [t.trial_id for t in plan]


def test_a_trial_that_always_fails_uses_its_attempts_and_the_sweep_goes_on(tmp_path: Path) -> None:
    plan = plan_trials(windows(256), 2, "sequential", seed=1)
    nodes = StandInNodes(set())
    original = nodes.run_trial

    def always_fail_first(trial_id: str, point: TrialPoint, timeout_s: float):
        if trial_id == plan[0].trial_id:
            return {"ok": False, "error": "timeout"}
        return original(trial_id, point, timeout_s)

    nodes.run_trial = always_fail_first  # type: ignore[method-assign]
    outcome = _engine(tmp_path / "run", nodes).run(plan)
    assert outcome.failed_trials == (plan[0].trial_id,)
    assert outcome.remaining == 1
    statuses = [(r["trial_id"], r["status"]) for r in read_trials(tmp_path / "run")]
    assert statuses == [(plan[0].trial_id, "failed")] * 2 + [(plan[1].trial_id, "ok")]


def test_stop_rule_ends_a_settled_point_early_and_says_so(tmp_path: Path) -> None:
    plan = plan_trials(windows(256, 65535), 10, "sequential", seed=1)
    engine = _engine(tmp_path / "run", StandInNodes(set()))
    engine.stop_rule = StopRule("client_response_s", 0.05, 3, 0.90)
    outcome = engine.run(plan)
    # The stand-in answers 0.5 s every time: zero spread, so each point settles at min_n.
    assert (outcome.completed, outcome.remaining) == (6, 0)
    assert outcome.stopped_early == 14
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    stopped = [e for e in events if e["event"] == "point_stopped"]
    assert [e["point"] for e in stopped] == [
        {"initial_window_size": 256},
        {"initial_window_size": 65535},
    ]
    assert all(e["n"] == 3 for e in stopped)


class AlternatingMeter(ConstantMeter):
    """Each trial's power 40 mW above or below the last's: energy spread no repetition count
    narrows below a few mJ."""

    def __init__(self) -> None:
        self.trials = 0

    def begin_trial(self) -> None:
        self.trials += 1

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        window = super().window(start_wall_ns, end_wall_ns, before_s=before_s, after_s=after_s)
        power = POWER_MW + (40.0 if self.trials % 2 else -40.0)
        return dataclasses.replace(window, power_mw=np.full_like(window.t_s, power))


@pytest.mark.parametrize("resolution", [None, ACS712_RECORD])
def test_the_early_stop_never_aims_below_the_meters_floor_and_says_when_that_is_why(
    tmp_path: Path, resolution: Mapping[str, Any] | None
) -> None:
    """Energy spread by ±20 mJ a trial: a 0.1 % target is out of reach, so without a stated
    resolution the point runs every repetition; an ACS712's floor over the 0.5 s window (one
    132 mW step, 66 mJ) is wider than the interval at n = 3, and the point stops there."""
    plan = plan_trials(windows(256), 8, "sequential", seed=1)
    notices: list[str] = []
    engine = SweepEngine(
        recorder=RunRecorder.create(tmp_path / "run", AXES, {"axes": list(AXES)}),
        nodes=StandInNodes(set()),
        meter=AlternatingMeter(),
        idle_mw=IDLE_MW,
        retries=1,
        trial_timeout_s=10,
        post=lambda event: notices.append(getattr(event, "text", "")),
        stop_rule=StopRule("energy_mj", 0.001, 3, 0.90),
        meter_resolution=resolution,
    )
    outcome = engine.run(plan)
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    stopped = [e for e in events if e["event"] == "point_stopped"]
    if resolution is None:
        assert (outcome.completed, outcome.stopped_early, stopped) == (8, 0, [])
        return
    assert (outcome.completed, outcome.stopped_early) == (3, 5)
    (event,) = stopped
    assert event["by_floor"] is True
    # One step held over the 0.5 s window, and the sensor's noise averaged over the stand-in
    # meter's 501 samples (1 kHz, both ends).
    step_mj, noise_mj = ACS712_RECORD["power_mw"] * 0.5, ACS712_RECORD["noise_mw"] * 0.5 / 501**0.5
    assert event["floor"] == pytest.approx(step_mj + noise_mj, rel=1e-3)
    assert event["half_width"] <= event["floor"]
    assert any("settled after 3 trials at the meter's floor" in text for text in notices)


class AnnouncingNodes(StandInNodes):
    """Stand-in nodes whose client announces a window one byte short of the point's, as nghttp
    does (2^N - 1), and sees nothing of the server's."""

    def run_trial(self, trial_id: str, point: TrialPoint, timeout_s: float) -> dict[str, Any]:
        record = super().run_trial(trial_id, point, timeout_s)
        window = dict(point.settings)["initial_window_size"]
        record["settings_announced"] = {"SETTINGS_INITIAL_WINDOW_SIZE": window - 1}
        record["settings_received"] = None
        return record


def test_each_trials_announcements_are_logged_and_its_row_flags_the_mismatch(
    tmp_path: Path,
) -> None:
    plan = plan_trials(windows(4096), 2, "sequential", seed=1)
    _engine(tmp_path / "run", AnnouncingNodes(set())).run(plan)
    rows = read_trials(tmp_path / "run")
    assert [(r["settings_mismatch"], r["settings_mismatches"]) for r in rows] == [
        ("1", "initial_window_size 4096 asked, 4095 in force (client SETTINGS_INITIAL_WINDOW_SIZE)")
    ] * 2
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    logged = [e for e in events if e["event"] == "settings_in_force"]
    assert [(e["trial_id"], e["attempt"]) for e in logged] == [(t.trial_id, 1) for t in plan]
    assert logged[0]["announced"] == {"SETTINGS_INITIAL_WINDOW_SIZE": 4095}
    assert logged[0]["received"] is None


class ReportingNodes(StandInNodes):
    """A client whose record lists two exchanges 250 ms apart, 50 ms each, in a 500 ms trial
    on its monotonic clock (the periodic workload's record)."""

    def run_trial(self, trial_id: str, point: TrialPoint, timeout_s: float) -> dict[str, Any]:
        record = super().run_trial(trial_id, point, timeout_s)
        mono, ms = 7_000_000_000, 1_000_000
        record |= {"t_mono_start_ns": mono, "t_mono_end_ns": mono + 500 * ms}
        record["phases"] = {
            "connect_done_mono_ns": mono + 10 * ms,
            "exchange_done_mono_ns": mono + 300 * ms,
            "close_done_mono_ns": mono + 500 * ms,
        }
        record["exchanges"] = [
            {"index": i, "start_mono_ns": mono + at * ms, "ok": True, "handshake": kind,
             "response_end_mono_ns": mono + (at + 50) * ms}
            for i, (at, kind) in enumerate(((0, "full"), (250, "resumed")))
        ]  # fmt: skip
        return record


def test_a_trial_listing_its_exchanges_splits_its_energy_per_exchange(tmp_path: Path) -> None:
    kind = "periodic"
    recorder = RunRecorder.create(tmp_path / "run", AXES, {"axes": list(AXES)}, kind)
    posted: list[DashboardEvent] = []
    engine = stand_in_engine(recorder, ReportingNodes(set()), posted.append)
    engine.run(plan_trials(windows(256), 1, "randomized-blocked", seed=3))
    (row,) = read_trials(tmp_path / "run")
    above_mw = POWER_MW - IDLE_MW
    assert float(row[f"{kind}_energy_per_report_mj"]) == pytest.approx(POWER_MW * 0.5 / 2)
    assert float(row[f"{kind}_energy_per_report_above_idle_mj"]) == pytest.approx(above_mw / 4)
    # Each busy 50 ms, each tail 200 ms (the last one's to the window's end).
    assert float(row[f"{kind}_exchange_energy_mean_mj"]) == pytest.approx(above_mw * 0.05)
    assert float(row[f"{kind}_idle_tail_mean_mj"]) == pytest.approx(above_mw * 0.2)
    assert float(row[f"{kind}_idle_tail_energy_mj"]) == pytest.approx(above_mw * 0.4)
    (finished,) = [event for event in posted if isinstance(event, TrialFinished)]
    assert finished.exchanges == (("ok", 2), ("failed", 0), ("full", 1), ("resumed", 1))
