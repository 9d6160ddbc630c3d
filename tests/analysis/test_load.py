from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from analysis.columns import METRICS, REQUIRED_COLUMNS
from analysis.errors import RunFormatError
from analysis.load import axis_kinds, load_power, load_run, read_events, require_results
from analysis.trial_columns import NUMERIC_COLUMNS, header


def test_loads_ok_rows_and_counts_failed_attempts(run_copy: Path) -> None:
    run = load_run(run_copy)
    assert run.axes == ("initial_window_size",)
    assert len(run.ok) == 45 and run.attempts == 46
    assert list(run.failed["trial_id"]) == ["t0003"]
    assert (run.ok["status"] == "ok").all()
    assert run.ok["client_response_s"].dtype == np.float64
    assert run.ok["initial_window_size"].dtype == np.int64
    assert run.confidence == 0.90
    assert run.ok["initial_window_size"].nunique() == 9
    assert not run.torn_tail


def test_the_column_names_match_the_recorder() -> None:
    recorded = header(("initial_window_size",))
    assert set(REQUIRED_COLUMNS) <= set(recorded)
    assert set(NUMERIC_COLUMNS) <= set(recorded)
    assert {m.name for m in METRICS} <= set(recorded)


def test_a_torn_last_line_is_cut_off(run_copy: Path) -> None:
    with (run_copy / "trials.csv").open("a") as handle:
        handle.write("t9999,1,ok,,46,1,1,256,17950")
    run = load_run(run_copy)
    assert run.torn_tail and len(run.ok) == 45


def test_empty_cells_become_nan_and_confidence_comes_from_the_config(run_copy: Path) -> None:
    lines = (run_copy / "trials.csv").read_text().splitlines()
    columns = lines[0].split(",")
    cells = lines[1].split(",")
    cells[columns.index("energy_mj")] = ""
    lines[1] = ",".join(cells)
    (run_copy / "trials.csv").write_text("\n".join(lines) + "\n")
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["config"]["run"]["confidence"] = 0.95
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    run = load_run(run_copy)
    assert math.isnan(run.ok["energy_mj"].iloc[0])
    assert run.confidence == 0.95


def _edit_manifest(run: Path, change: dict[str, object], drop: str = "") -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(change)
    manifest.pop(drop, None)
    manifest.get("config", {}).pop(drop, None)
    (run / "manifest.json").write_text(json.dumps(manifest))


def _edit_cell(run: Path, line: int, column: str, value: str) -> None:
    lines = (run / "trials.csv").read_text().splitlines()
    columns = lines[0].split(",")
    cells = lines[line - 1].split(",")
    cells[columns.index(column)] = value
    lines[line - 1] = ",".join(cells)
    (run / "trials.csv").write_text("\n".join(lines) + "\n")


def _break_manifest_json(run: Path) -> None:
    (run / "manifest.json").write_text('{"format_version": 1,')


def _manifest_not_object(run: Path) -> None:
    (run / "manifest.json").write_text("[1, 2]")


def _no_manifest(run: Path) -> None:
    (run / "manifest.json").unlink()


def _newer_format(run: Path) -> None:
    _edit_manifest(run, {"format_version": 3})


def _no_format(run: Path) -> None:
    _edit_manifest(run, {}, drop="format_version")


def _bad_axes(run: Path) -> None:
    _edit_manifest(run, {"axes": "initial_window_size"})


def _no_axes_and_no_sweep(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["axes"]
    del manifest["config"]["sweep"]
    (run / "manifest.json").write_text(json.dumps(manifest))


def _bad_confidence(run: Path) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["config"]["run"]["confidence"] = 90
    (run / "manifest.json").write_text(json.dumps(manifest))


def _no_trials(run: Path) -> None:
    (run / "trials.csv").unlink()


def _empty_trials(run: Path) -> None:
    (run / "trials.csv").write_text("")


def _missing_column(run: Path) -> None:
    lines = (run / "trials.csv").read_text().splitlines()
    lines[0] = lines[0].replace("server_cpu_pct", "server_cpu_percent")
    (run / "trials.csv").write_text("\n".join(lines) + "\n")


def _axis_not_in_table(run: Path) -> None:
    _edit_manifest(run, {"axes": ["initial_window_size", "max_concurrent_streams"]})


def _text_in_a_number(run: Path) -> None:
    _edit_cell(run, 5, "client_cpu_s", "fast")


def _fractional_setting(run: Path) -> None:
    _edit_cell(run, 6, "initial_window_size", "256.5")


def _unknown_status(run: Path) -> None:
    _edit_cell(run, 4, "status", "maybe")


def _extra_field(run: Path) -> None:
    lines = (run / "trials.csv").read_text().splitlines()
    lines[7] += ",surplus"
    (run / "trials.csv").write_text("\n".join(lines) + "\n")


def _duplicate_ok(run: Path) -> None:
    lines = (run / "trials.csv").read_text().splitlines()
    lines.append(lines[1])
    (run / "trials.csv").write_text("\n".join(lines) + "\n")


def _not_a_directory(run: Path) -> None:
    for child in sorted(run.rglob("*"), reverse=True):
        child.unlink() if child.is_file() else child.rmdir()
    run.rmdir()
    run.write_text("")


BROKEN = [
    (_no_manifest, r"manifest\.json: no such file"),
    (_break_manifest_json, r"manifest\.json: not valid JSON"),
    (_manifest_not_object, r"manifest\.json: expected a JSON object"),
    (_newer_format, r"manifest\.json: format_version: 3 is not supported"),
    (_no_format, r"manifest\.json: format_version: missing"),
    (_bad_axes, r"manifest\.json: axes: expected a list"),
    (_no_axes_and_no_sweep, r"manifest\.json: axes: missing"),
    (_bad_confidence, r"manifest\.json: config\.run\.confidence: 90 is not in \(0, 1\)"),
    (_no_trials, r"trials\.csv: no such file"),
    (_empty_trials, r"trials\.csv: empty"),
    (_missing_column, r"trials\.csv: column server_cpu_pct: missing"),
    (_axis_not_in_table, r"trials\.csv: column max_concurrent_streams: missing"),
    (_text_in_a_number, r"trials\.csv: line 5, column client_cpu_s: 'fast' is not a number"),
    (_fractional_setting, r"trials\.csv: line 6, column initial_window_size: '256\.5'"),
    (_unknown_status, r"trials\.csv: line 4, column status: 'maybe'"),
    (_extra_field, r"trials\.csv: line 8: \d+ fields where the header has \d+"),
    (_duplicate_ok, r"trials\.csv: line \d+, column trial_id: t0001 already has an ok row"),
    (_not_a_directory, r"study: not a directory"),
]


@pytest.mark.parametrize(("breaks", "message"), BROKEN, ids=[b.__name__ for b, _ in BROKEN])
def test_a_malformed_run_is_one_line_naming_the_file(run_copy: Path, breaks, message) -> None:
    breaks(run_copy)
    with pytest.raises(RunFormatError, match=message) as error:
        load_run(run_copy)
    text = str(error.value)
    assert "\n" not in text
    assert text.startswith(str(run_copy))
    assert error.value.exit_status == 2


def test_a_run_without_results_cannot_be_reported(run_copy: Path) -> None:
    lines = (run_copy / "trials.csv").read_text().splitlines()
    (run_copy / "trials.csv").write_text(lines[0] + "\n" + lines[3] + "\n")  # the failed attempt
    run = load_run(run_copy)
    with pytest.raises(RunFormatError, match=r"trials\.csv: no ok rows \(1 attempts"):
        require_results(run)


def test_power_traces_and_events(run_copy: Path) -> None:
    run = load_run(run_copy)
    trace = load_power(run, "t0001")
    assert trace is not None and trace.shape[1] == 2
    assert load_power(run, "t9999") is None
    np.save(run_copy / "power" / "t0002.npy", np.zeros(5))
    with pytest.raises(RunFormatError, match=r"power/t0002\.npy: expected a float \(n, 2\)"):
        load_power(run, "t0002")
    (run_copy / "power" / "t0004.npy").write_bytes(b"not numpy")
    with pytest.raises(RunFormatError, match=r"power/t0004\.npy: not a readable \.npy"):
        load_power(run, "t0004")
    events = read_events(run_copy)
    assert events[0]["event"] == "sweep_started"
    with (run_copy / "events.jsonl").open("a") as handle:
        handle.write('{"t_wall_ns": 1, "ev')  # torn: tolerated
    assert len(read_events(run_copy)) == len(events)
    with (run_copy / "events.jsonl").open("a") as handle:
        handle.write("\nnot json\n")
    with pytest.raises(RunFormatError, match=r"events\.jsonl: line \d+: not valid JSON"):
        read_events(run_copy)


@pytest.mark.parametrize(
    ("low", "high", "kind"), [(100, 2_000_000, "int"), (1.0, 100.0, "float"), (2, 50.5, "float")]
)
def test_a_searched_parameter_takes_its_kind_from_the_searchs_bounds(
    low: float, high: float, kind: str
) -> None:
    """A breakdown search's parameter is an axis no sweep list names: its bounds say whether
    its probes are integers (payload_doubles) or not (a searched rate_hz is no integer)."""
    manifest = {
        "config": {
            "sweep": {"transport": ["sse", "grpc"]},
            "search": {"param": "searched", "low": low, "high": high},
        }
    }
    assert axis_kinds(manifest, ("searched", "transport")) == {
        "searched": kind,
        "transport": "category",
    }
