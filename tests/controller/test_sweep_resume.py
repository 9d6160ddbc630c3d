"""A run folder is enough to resume its run: the config layers it records rebuild its config,
a run stopped before its baseline is resumable, and what a paused sweep prints is the whole
command (issue 13, items 8 and 9). The end-to-end tests do the same with real sweeps."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from rich.console import Console

from controller.cli.sweep import _conclude, _manifest, _prepare
from controller.config.load import Layer, config_of, read_layers, with_overrides
from controller.errors import ConfigError
from controller.run.recorder import RunRecorder
from controller.sweep.engine import SweepOutcome

SETS = ("run.repetitions=3", "sweep.initial_window_size=[1024, 65535]", "run.name=mine")


def _args(config: Path | None, resume: Path | None, *sets: str) -> argparse.Namespace:
    return argparse.Namespace(
        config=config, set=list(sets), resume=resume, out=Path("unused"), study=None
    )


def _toml(tmp_path: Path) -> Path:
    path = tmp_path / "my.toml"
    path.write_text("[run]\nseed = 7\nrepetitions = 9\n[workload]\ntotal_bytes = 600_000\n")
    return path


def _started(tmp_path: Path, *sets: str) -> Path:
    """A run folder as `h2iot sweep FILE --set ...` leaves it before measuring anything."""
    sweep = _prepare(_args(_toml(tmp_path), None, *sets))
    run = tmp_path / "run"
    RunRecorder.create(run, sweep.axes, _manifest(sweep), sweep.config.workload.kind).close()
    return run


def test_recorded_layers_rebuild_the_config_whatever_became_of_the_file(tmp_path: Path) -> None:
    path = _toml(tmp_path)
    layers = read_layers(path, SETS)
    recorded = json.loads(json.dumps([layer.to_dict() for layer in layers]))
    path.write_text("[run]\nseed = 8\n")  # edited after the run started
    rebuilt = config_of([Layer.from_dict(record, "manifest.json") for record in recorded])
    original = config_of(layers)
    assert rebuilt == original and rebuilt.to_dict() == original.to_dict()
    assert (rebuilt.run.seed, rebuilt.run.repetitions, rebuilt.run.name) == (7, 3, "mine")
    assert with_overrides(layers, ["run.retries=0"])[-1].overrides == (*SETS, "run.retries=0")


def test_a_malformed_recorded_layer_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^m\.json: config_layers: \{'source': 3\} is not"):
        Layer.from_dict({"source": 3}, "m.json")


def test_resume_alone_continues_with_the_runs_own_config(tmp_path: Path) -> None:
    run = _started(tmp_path, *SETS)
    sweep = _prepare(_args(None, run))
    assert sweep.config == _prepare(_args(_toml(tmp_path), None, *SETS)).config
    assert (sweep.config.run.repetitions, len(sweep.plan)) == (3, 6)
    # --set given on resume stacks on the recorded overrides; the plan is still checked.
    assert _prepare(_args(None, run, "run.retries=0")).config.run.retries == 0
    with pytest.raises(ConfigError, match=r"run\.repetitions was 3 in this run, the config says 4"):
        _prepare(_args(None, run, "run.repetitions=4"))


def test_a_run_stopped_before_its_baseline_can_be_resumed(tmp_path: Path) -> None:
    run = _started(tmp_path, *SETS)
    manifest = json.loads((run / "manifest.json").read_text())
    assert {"config", "config_layers", "software", "planned_trials"} <= set(manifest)
    assert "idle_baseline_mw" not in manifest  # measured when the run resumes
    # What an older h2iot left when killed during the baseline: no config, no rows.
    (run / "manifest.json").write_text(json.dumps({"format_version": 2, "axes": ["x"]}))
    with pytest.raises(ConfigError, match="records no config layers") as caught:
        _prepare(_args(None, run))
    assert "\n" not in str(caught.value)
    assert _prepare(_args(_toml(tmp_path), run, *SETS)).config.run.repetitions == 3


def test_a_paused_sweep_prints_the_whole_resume_command(tmp_path: Path) -> None:
    console = Console(width=200, color_system=None, record=True)
    run = tmp_path / "runs" / "my run"
    status = _conclude(console, SweepOutcome(2, (), 4, "stopped on request"), run)
    assert status == 3
    assert f"resume: h2iot sweep --resume '{run}'" in console.export_text().splitlines()
