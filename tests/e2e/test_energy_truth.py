"""End to end: the virtual meter books a node's work when it was done (issue 12, defect 1).

Per trial of a real local sweep, the ground truth's energy above idle over the trial's own
window must match the Pi 3B model applied to the client's own activity in that window, measured
by the agent, not the meter (its CPU time over the fetch; over the "process" window its trial
process's, timed by the node's anchor; and its bytes): `analysis.agreement`, within 10 %. Small
pages make short trials that start right after the client interpreter's start-up, the case the
old rescan got wrong: it found the new interpreter late and booked its whole start-up at once,
carried into the trial (up to 9x the trial's own energy).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from analysis.agreement import TOLERANCE, agreement, outside
from analysis.load import load_run
from tests.netns import require_root

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "local.toml"
SHORT = [
    # Fetches of 20 ms and more at 65535 on a fast idle machine: the truth and the model
    # place a trial's edges a few ms of activity apart, too large a share of a shorter window
    # (600 kB made 8 ms fetches on 2026-12-05 and 2 runs in 4 strayed by up to 16 %).
    "--set", "workload.total_bytes=2000000",
    "--set", "run.idle_baseline_s=1",
    "--set", "sweep.initial_window_size=[1024, 65535]",
]  # fmt: skip


def _sweep(out: Path, *extra: str) -> Path:
    command = [sys.executable, "-m", "controller.cli", "sweep", str(CONFIG), "--no-dashboard"]
    result = subprocess.run(
        [*command, "--out", str(out), *SHORT, *extra],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def _check(run_dir: Path, trials: int) -> None:
    table = agreement(load_run(run_dir))
    assert table is not None and len(table) == trials
    stray = outside(table, TOLERANCE)
    assert stray.empty, "truth vs model beyond 10 %:\n" + table.to_string()


def test_the_truth_of_every_fetch_matches_the_model_of_the_clients_own_work(
    tmp_path: Path,
) -> None:
    """The embedded default, CPU and network terms: the fetch's bytes are read between its
    marker edges (`meter-edges.csv`); on the shared loopback they may include other traffic
    of this machine, which the truth then holds too."""
    run = _sweep(tmp_path, "--set", "run.repetitions=4")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["energy_window"] == "fetch"
    assert {"mean_mw", "sd_mw", "drift_mw", "quiet"} <= set(manifest["idle_baseline"])
    assert "change_mw" in manifest["idle_baseline_end"]
    assert (run / manifest["meter"]["edges"]).exists()
    _check(run, trials=8)


def test_the_truth_of_every_trial_process_matches_the_model_of_its_cpu_and_bytes(
    tmp_path: Path,
) -> None:
    """The study's window: the whole trial process, start-up included. On emulated nodes with
    no limit (`device = "custom"`: a cgroup and a network namespace each), so the client's
    interface counts its own traffic only, and the network term is checked too."""
    require_root()
    device = ["--set", 'nodes.client.device="custom"', "--set", 'nodes.server.device="custom"']
    run = _sweep(tmp_path, "--set", "run.repetitions=2", "--set", "energy.window=process", *device)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["energy_window"] == "process"
    assert manifest["meter"]["accounting"]["client"]["source"] == "cgroup"
    assert manifest["meter"]["model"]["network_nj_per_byte"] > 0
    ok = load_run(run).ok
    # The client's own end of the data link: its HTTP/2 bytes and the TCP/IP/Ethernet headers.
    assert (ok["client_interface_bytes"] > ok["client_bytes_received"]).all()
    _check(run, trials=4)
