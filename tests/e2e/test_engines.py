"""The nghttp2 engine end to end: the same sweep through `h2iot sweep` on local nodes with each
engine and with mixed engines, every trial recorded with client and server figures, and
`h2iot report` putting an h2 run and an nghttp2 run side by side. Also what the config and
`h2iot nodes check` say about nghttp2 nodes."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.config import load_config
from controller.errors import ConfigError
from tests.conftest import require_tool, without_sbin

H2IOT = [sys.executable, "-m", "controller.cli"]
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = [
    "--set", "workload.total_bytes=600000",
    "--set", "run.idle_baseline_s=1",
    "--set", "run.repetitions=2",
    "--set", "sweep.initial_window_size=[1024, 65535]",
]  # fmt: skip
ENGINES = {
    "builtin": ("builtin", "builtin"),
    "nghttp2": ("nghttp2", "nghttp2"),
    "nghttp-client": ("nghttp2", "builtin"),
    "nghttpd-server": ("builtin", "nghttp2"),
}


def _sweep(out: Path, client: str, server: str) -> Path:
    result = subprocess.run(
        [*H2IOT, "sweep", str(CONFIGS / "local.toml"), "--no-dashboard", "--out", str(out),
         *SMALL, "--set", f"nodes.client.engine={client}", "--set",
         f"nodes.server.engine={server}", "--set", f"run.name={client}-{server}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_tool("nghttp", "nghttpd")
    return {
        name: _sweep(tmp_path_factory.mktemp(name), client, server)
        for name, (client, server) in ENGINES.items()
    }


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "trials.csv").open() as handle:
        return list(csv.DictReader(handle))


def _manifest(run: Path) -> dict[str, Any]:
    return dict(json.loads((run / "manifest.json").read_text()))


# Both users of `runs` are quiet, so its four sweeps run once, in the quiet part: the window's
# effect (every 1024-byte fetch slower than every 65535-byte one) is timing, which a loaded
# neighbour reversed once (a 65535 fetch held up 0.72 s).
@pytest.mark.quiet
@pytest.mark.parametrize("name", list(ENGINES))
def test_every_trial_has_client_and_server_figures(runs: dict[str, Path], name: str) -> None:
    client, server = ENGINES[name]
    run = runs[name]
    rows = _rows(run)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), rows
    for row in rows:
        for column in ("client_response_s", "client_cpu_s", "client_cpu_pct",
                       "client_rss_peak_bytes", "server_serve_s", "server_cpu_s",
                       "server_cpu_pct", "server_rss_peak_bytes", "server_bytes_sent",
                       "energy_mj"):  # fmt: skip
            assert float(row[column]) > 0, (column, row)
        # Frames are counted by the builtin engine only (nghttp2 would need verbose output).
        assert (row["client_data_frames"] != "") == (client == "builtin")
        assert (row["server_data_frames"] != "") == (server == "builtin")
    manifest = _manifest(run)
    nodes = manifest["config"]["nodes"]
    assert (nodes["client"]["engine"], nodes["server"]["engine"]) == (client, server)
    for role, engine in (("client", client), ("server", server)):
        version = manifest["nodes"][role]["engine_version"]
        assert (version is not None and "nghttp2/" in version) == (engine == "nghttp2")
    by_window: dict[str, list[float]] = {}
    for row in rows:
        by_window.setdefault(row["initial_window_size"], []).append(float(row["client_response_s"]))
    # The study's effect, in shape, on every engine: a small window takes longer.
    assert min(by_window["1024"]) > max(by_window["65535"])


@pytest.mark.quiet
def test_the_report_compares_a_builtin_run_with_an_nghttp2_run(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    base, other = runs["builtin"], runs["nghttp2"]
    result = subprocess.run([*H2IOT, "report", str(base), str(other)], capture_output=True,
                            text=True, timeout=300, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    compare = base / "report" / f"compare-{other.name}"
    markdown = (compare / "report.md").read_text()
    assert "| config.nodes.client.engine | builtin | nghttp2 |" in markdown
    assert "| config.nodes.server.engine | builtin | nghttp2 |" in markdown
    with (compare / "comparison.csv").open() as handle:
        table = list(csv.DictReader(handle))
    points = {(r["metric"], r["initial_window_size"]) for r in table}
    for metric in ("client_response_s", "client_cpu_s", "server_cpu_s", "energy_mj"):
        assert {(metric, "1024"), (metric, "65535")} <= points


# ---------------------------------------------------------------- config and nodes check


def test_the_nghttp2_study_is_the_study_on_nghttp2() -> None:
    study = load_config(CONFIGS / "study.toml")
    nghttp2 = load_config(CONFIGS / "study-nghttp2.toml")
    assert (nghttp2.client.engine, nghttp2.server.engine) == ("nghttp2", "nghttp2")
    assert nghttp2.workload.unrepresentable_window == "map"
    assert nghttp2.sweep == study.sweep and nghttp2.meter == study.meter
    assert nghttp2.run.repetitions == study.run.repetitions
    assert nghttp2.workload.param("total_bytes") == study.workload.param("total_bytes")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ("nodes.client.engine=nghttp2", "workload.unrepresentable_window=reject"),
            '--set: sweep.initial_window_size[0]: 256 is not 2^N - 1 bytes, which nghttp2 needs '
            '(nodes.client.engine = "nghttp2"); the nearest is 255: use it, or set '
            'workload.unrepresentable_window = "map" to run the nearest in its place',
        ),
        (
            ("nodes.client.engine=nghttp2", "workload.unrepresentable_window=reject",
             "sweep.initial_window_size=[255, 65535]", "workload.connection_window=65536"),
            "--set: workload.connection_window: 65536 is not 2^N - 1 bytes",
        ),
        (
            ("nodes.server.engine=nghttp2", "sweep.max_frame_size=[16384]"),
            '--set: sweep.max_frame_size: nghttpd has no option to announce it '
            '(nodes.server.engine = "nghttp2"; it announces initial_window_size, '
            'header_table_size, max_concurrent_streams); sweep it with engine "builtin"',
        ),
        (
            ("nodes.client.engine=nghttp2", "workload.window_update_policy=exhausted"),
            "--set: workload.window_update_policy: nghttp2 updates windows by 'half' only, "
            'not "exhausted" (nodes.client.engine = "nghttp2")',
        ),
        (("nodes.client.engine=nghttp3",), "--set: nodes.client.engine: expected one of"),
    ],
)  # fmt: skip
def test_what_nghttp2_cannot_run_is_refused_at_load(
    overrides: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert str(info.value).startswith(message)
    assert info.value.exit_status == 2


def test_mapping_and_exact_windows_load() -> None:
    mapped = load_config(None, ("nodes.client.engine=nghttp2",))
    assert mapped.workload.unrepresentable_window == "map"
    exact = load_config(None, ("nodes.client.engine=nghttp2", "nodes.server.engine=nghttp2",
                               "workload.unrepresentable_window=reject",
                               "sweep.initial_window_size=[255, 4095, 65535]"))  # fmt: skip
    assert exact.server.engine == "nghttp2"
    # A server announces no connection window: only an nghttp2 client needs it exact.
    server_only = load_config(None, ("nodes.server.engine=nghttp2",
                                     "workload.unrepresentable_window=reject",
                                     "sweep.initial_window_size=[255]",
                                     "workload.connection_window=65536"))  # fmt: skip
    assert server_only.workload.connection_window == 65536


def _path_without(tool: str, bin_dir: Path) -> str:
    """A PATH of one directory holding a link to every program on PATH except `tool`: the
    tools a local node needs stay, wherever the distribution puts them beside `tool`."""
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        try:
            programs = list(Path(directory).iterdir()) if directory else []
        except OSError:  # absent, or this user may not read it (root's, as an ordinary user)
            continue
        for program in programs:
            link = bin_dir / program.name
            if program.name != tool and not link.exists() and os.access(program, os.X_OK):
                link.symlink_to(program)
    assert shutil.which(tool, path=str(bin_dir)) is None
    return str(bin_dir)


def test_nodes_check_names_the_missing_package(tmp_path: Path) -> None:
    require_tool("nghttpd")
    path = _path_without("nghttpd", tmp_path / "bin")
    (tmp_path / "empty").mkdir()
    # Not on PATH, nor where Debian installs it (/usr/sbin, looked in as well): not installed.
    result = subprocess.run(
        without_sbin([*H2IOT, "nodes", "check", str(CONFIGS / "local.toml"), "--clock-samples",
                      "3", "--set", "nodes.server.engine=nghttp2", "--set",
                      "nodes.client.engine=nghttp2"], str(tmp_path / "empty")),
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PATH": path},
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip() == (
        "h2iot: error: server (local): nghttpd not found on PATH nor in /usr/local/sbin, "
        "/usr/sbin, /sbin: install the Debian package nghttp2-server (apt install "
        'nghttp2-server) (nodes.server.engine = "nghttp2")'
    )
