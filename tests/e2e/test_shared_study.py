"""Several benches sharing one sweep through optuna's storage (`h2iot sweep --study URL`): two
benches on this machine, each a pair of local nodes with its own virtual meter, take the plan's
trials between them from an SQLite file and from a real PostgreSQL server this test starts
(Debian's postgresql, initdb in a temporary directory as the postgres user); one bench killed
mid-trial, the other finishing every trial, the killed one's included; a bench planning other
trials refused in one line."""

from __future__ import annotations

import csv
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import h2iot

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SMALL = (
    "--set", "workload.total_bytes=300000", "--set", "sweep.initial_window_size=[4095, 65535]",
    "--set", "run.repetitions=3", "--set", "run.idle_baseline_s=1",
    "--set", "energy.idle_end=false", "--heartbeat", "1",
)  # fmt: skip
PLANNED = {f"t{i}" for i in range(1, 7)}


def _command(url: str, out: Path, bench: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "controller.cli", "sweep", str(REPO / "configs" / "local.toml"),
        "--no-dashboard", "--out", str(out), "--study", url, "--bench", bench, *SMALL, *extra,
    ]  # fmt: skip


def _run_dir(out: Path) -> Path:
    (run,) = out.iterdir()
    return run


def _ok_trials(out: Path) -> list[str]:
    with (_run_dir(out) / "trials.csv").open() as handle:
        return [row["trial_id"] for row in csv.DictReader(handle) if row["status"] == "ok"]


def test_two_benches_share_a_study_in_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    # 24 trials: several seconds of them, so the bench that starts second still finds its share.
    longer = ("--set", "run.repetitions=12")
    benches = {
        bench: subprocess.Popen(
            _command(url, tmp_path / bench, bench, *longer),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for bench in ("a", "b")
    }
    for bench, process in benches.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, f"bench {bench}: {stdout}{stderr}"
    taken = {bench: _ok_trials(tmp_path / bench) for bench in benches}
    # Every planned trial once, each on one bench. (How they share depends on when each is
    # ready: a bench's idle baseline waits for quiet nodes, which the other's trials are not.)
    assert sorted(taken["a"] + taken["b"]) == sorted(f"t{i:02d}" for i in range(1, 25)), taken
    print({bench: len(trials) for bench, trials in taken.items()})
    manifest = json.loads((_run_dir(tmp_path / "a") / "manifest.json").read_text())
    assert manifest["study"] == {
        "name": "h2iot",
        "storage": url,
        "bench": "a",
        "heartbeat_s": 1,
        "grace_s": 3,
    }
    # A bench planning other trials (another repetitions) is refused at once, in one line.
    other = h2iot("sweep", *_command(url, tmp_path / "c", "c", "--set", "run.repetitions=2")[4:])
    assert other.returncode == 1, other.stdout + other.stderr
    assert other.stderr == (
        f"h2iot: error: --study {url}: study 'h2iot' plans other trials (another config "
        "or seed): give this run its own run.name, or the same config\n"
    )
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


@pytest.fixture
def postgres() -> Iterator[str]:
    """A PostgreSQL server of this test's own on 127.0.0.1, as the postgres user; its URL."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not bins or os.geteuid() != 0:
        message = "needs Debian's postgresql (.ci/apt/study.txt) and root to run it as postgres"
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide every real component: {message}")
        pytest.skip(message)
    bin_dir = bins[-1].parent
    # Not under pytest's root-only temporary tree: the postgres user must reach its directory.
    data = Path(tempfile.mkdtemp(prefix="h2iot-pgdata-"))
    account = pwd.getpwnam("postgres")
    os.chown(data, account.pw_uid, account.pw_gid)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def as_postgres(*argv: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv],
            check=True, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    as_postgres(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    options = f"-h 127.0.0.1 -p {port} -k {data}"
    # Its log to a file: a server that inherited our pipe would hold it open past pg_ctl's exit.
    log = str(data / "server.log")
    as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", log, "-o", options, "-w", "start")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)


def test_a_bench_killed_mid_trial_leaves_it_to_the_other_on_postgresql(
    tmp_path: Path, postgres: str
) -> None:
    killed = subprocess.Popen(
        _command(postgres, tmp_path / "a", "a"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    events = None
    while events is None or "trial_started" not in events.read_text():
        assert time.monotonic() < deadline and killed.poll() is None, "bench a never started"
        found = list((tmp_path / "a").glob("*/events.jsonl"))
        events = found[0] if found else None
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)  # the bench, its local agents and its meter
    killed.wait(timeout=30)
    survivor = h2iot("sweep", *_command(postgres, tmp_path / "b", "b")[4:])
    assert survivor.returncode == 0, survivor.stdout + survivor.stderr
    assert "6 trials with results, 0 to go" in survivor.stdout
    # The killed bench's trial was taken again once its heartbeat went quiet: every planned
    # trial completed on the survivor, none lost; the killed bench recorded none.
    assert sorted(_ok_trials(tmp_path / "b")) == sorted(PLANNED)
    assert _ok_trials(tmp_path / "a") == []
    with (_run_dir(tmp_path / "b") / "trials.csv").open() as handle:
        assert {row["bench"] for row in csv.DictReader(handle)} == {"b"}
