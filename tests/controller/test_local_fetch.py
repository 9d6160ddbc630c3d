from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

H2IOT = [sys.executable, "-m", "controller.cli"]


def test_local_fetch_sweeps_windows_and_leaves_both_agents_records(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *H2IOT,
            "local-fetch",
            "--repeat",
            "2",
            "--windows",
            "1024,65535",
            "--site",
            str(tmp_path / "site"),
            "--out",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "page fetches by SETTINGS_INITIAL_WINDOW_SIZE" in result.stdout
    (run,) = (tmp_path / "runs").iterdir()
    fetches = [json.loads(line) for line in (run / "fetches.jsonl").read_text().splitlines()]
    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    assert [f["settings"]["initial_window_size"] for f in fetches] == [1024, 1024, 65535, 65535]
    assert all(f["ok"] for f in fetches)
    assert sorted(t["trial_id"] for t in trials) == sorted(f["trial_id"] for f in fetches)


def test_local_fetch_rejects_a_bad_window_list(tmp_path: Path) -> None:
    result = subprocess.run(
        [*H2IOT, "local-fetch", "--windows", "256,big", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--windows '256,big'" in result.stdout
