"""The nodes' conditions in a run: which trials are flagged and why, the manifest's summary,
the report's section; and the cells a trial record gives trials.csv."""

from __future__ import annotations

from analysis import conditions
from analysis.conditions import node_conditions, report_blocks, summarise, warnings
from analysis.document import Bullets, Table, to_markdown
from analysis.trial_columns import condition_columns
from controller.sweep.rows import condition_cells


def _row(trial: str, **cells: object) -> dict[str, object]:
    base: dict[str, object] = {
        "trial_id": trial,
        "client_cpu_freq_mhz": "1200.0",
        "client_governor": "performance",
        "client_temp_c": "55.0",
        "client_throttled_flags": "0x0",
        "client_other_cpu_pct": "1.0",
        "client_conditions_missing": "",
    }
    return {**base, **{f"client_{k}": v for k, v in cells.items()}}


def test_a_quiet_run_flags_nothing() -> None:
    rows = [_row(f"t{n}") for n in range(5)]
    assert warnings(rows) == []
    node = node_conditions(rows, "client")
    assert node.read == 5
    assert node.governors == {"performance": 5}
    assert node.clock_mhz == (1200.0, 1200.0)


def test_each_reason_is_counted_with_its_trials() -> None:
    rows = [
        _row("t1"),
        _row("t2"),
        _row("t3", throttled_flags="0x50005"),  # under-voltage and throttled now
        _row("t4", temp_c=str(conditions.HOT_C)),
        _row("t5", governor="ondemand", cpu_freq_mhz="600.0"),
        _row("t6", other_cpu_pct="35.5"),
        _row("t7", throttled_flags="0x40000"),  # throttling happened since the first trial
        _row("t8", cpu_freq_mhz="1190.0"),  # within 5 %: not a change
    ]
    node = node_conditions(rows, "client")
    assert node.flagged == {
        "throttled": ("t3", "t7"),
        "hot": ("t4",),
        "governor changed": ("t5",),
        "clock changed": ("t5",),
        "busy": ("t6",),
    }
    lines = warnings(rows)
    assert (
        "2 of 8 trials: the client node ran throttled (Raspberry Pi firmware flags) (t3, t7)"
        in lines
    )
    assert len(lines) == 5


def test_since_boot_flags_present_from_the_start_are_not_this_runs() -> None:
    rows = [_row(f"t{n}", throttled_flags="0x50000") for n in range(3)]
    assert node_conditions(rows, "client").flagged == {}


def test_missing_readings_are_unavailable_not_quiet() -> None:
    rows = [
        {
            "trial_id": "t1",
            "client_cpu_freq_mhz": "",
            "client_governor": "",
            "client_temp_c": "",
            "client_throttled_flags": "",
            "client_other_cpu_pct": "3.0",
            "client_conditions_missing": "temp_c: no readable thermal zone; governor: no cpufreq",
        }
    ]
    summary = summarise(rows)
    client = summary["client"]
    assert isinstance(client, dict)
    assert client["unavailable"] == {"temp_c": "no readable thermal zone", "governor": "no cpufreq"}
    assert client["temp_max_c"] is None and client["cpu_freq_mhz_range"] is None
    server = summary["server"]
    assert isinstance(server, dict) and server["trials_with_conditions"] == 0
    markdown = to_markdown(report_blocks(rows))
    assert "client: temp_c unavailable (no readable thermal zone)" in markdown
    assert "| client | 1 of 1 | unavailable | unavailable | unavailable | 3 |" in markdown


def test_a_run_without_conditions_has_no_section() -> None:
    assert report_blocks([{"trial_id": "t1", "client_response_s": 1.0}]) == []


def test_the_report_section_lists_the_warnings() -> None:
    blocks = report_blocks([_row("t1"), _row("t2", other_cpu_pct="50")])
    assert isinstance(blocks[1], Table)
    bullets = [b for b in blocks if isinstance(b, Bullets)]
    assert bullets and "beside other processes" in bullets[0].items[0]


def test_record_to_cells_to_findings() -> None:
    """The agent's record -> the controller's cells -> the analysis's reading of them."""
    record = {
        "conditions": {
            "cpu_freq_mhz": 600.0,
            "governor": "powersave",
            "temp_c": 83.2,
            "throttled_flags": 0x50005,
            "other_cpu_pct": 0.0,
            "cpus": [0, 1, 2, 3],
            "unavailable": {},
        }
    }
    cells = condition_cells("server", record)
    assert cells["server_throttled_flags"] == "0x50005"
    assert cells["server_conditions_missing"] == ""
    names = {c.name for c in condition_columns()}
    assert set(cells) <= names
    row = {"trial_id": "t1", **{k: "" if v is None else str(v) for k, v in cells.items()}}
    flagged = node_conditions([row], "server").flagged
    assert set(flagged) == {"throttled", "hot"}
    assert condition_cells("client", {"ok": False}) == {}
