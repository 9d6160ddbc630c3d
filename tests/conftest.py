"""Shared fixtures. Real components are required in CI (CI is set) and skipped elsewhere only
when missing, with the reason naming the component."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.ci_guard import (  # noqa: F401  (in CI, a skipped test fails the run)
    ROOT_SKIP,
    pytest_configure,
)

# Property tests: in CI each runs the same examples every time (derandomised from the test's
# name), so a red run is reproducible and a green one is not luck. 200 examples each: about 140
# property tests under coverage at 500 cost CI some 5 minutes of CPU. A test whose known
# counterexample needs more says so in its own settings (tests/agent/test_limits.py: 500) and
# keeps that counterexample as an @example. Elsewhere they keep exploring with fresh random
# examples (and remember failures in .hypothesis/). HYPOTHESIS_PROFILE overrides the choice.
settings.register_profile("ci", derandomize=True, max_examples=200, deadline=None, database=None)
settings.register_profile("dev", deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


# Paths (":"-separated) of which this session runs only the tests marked `root`: tests/suite.py
# runs the rest of them as an unprivileged user, beside this session.
ROOT_ONLY_IN = "H2IOT_TESTS_ROOT_ONLY_IN"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every end-to-end test is `slow` (`-m "not slow"` is the quick loop: units, properties,
    the real peers and devices, without whole sweeps); modules holding slow tests come first,
    so that the suite's parallel workers (tests/suite.py) start on them rather than end on
    them, the longest safety-net timeout first (the emulated Pis' 90 minutes). Runs before
    `-m` deselects."""
    for item in items:
        if item.nodeid.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.slow)
    weight: dict[str, float] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            timeout = item.get_closest_marker("timeout")
            module = item.nodeid.split("::")[0]
            weight[module] = max(
                weight.get(module, 0.0), float(timeout.args[0]) if timeout else 1.0
            )
    items.sort(key=lambda item: -weight.get(item.nodeid.split("::")[0], 0.0))
    root_only = tuple(f"{p.rstrip('/')}/" for p in os.environ.get(ROOT_ONLY_IN, "").split(":") if p)
    if root_only:
        left = {
            i for i in items if i.nodeid.startswith(root_only) and not i.get_closest_marker("root")
        }
        config.hook.pytest_deselected(items=[item for item in items if item in left])
        items[:] = [item for item in items if item not in left]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `root` is skipped as an ordinary user, before its fixtures run: that user's
    part of the suite (CI runs it as nobody) accepts exactly these skips."""
    if item.get_closest_marker("root") is not None and os.geteuid() != 0:
        pytest.skip(f"{ROOT_SKIP}: runs as root in the other part of the suite")


def require_tool(*names: str) -> None:
    """Skip the calling test when a tool is missing, except in CI where that is a failure."""
    missing = [name for name in names if shutil.which(name) is None]
    if not missing:
        return
    message = f"needs {', '.join(missing)} on PATH (install the Debian packages in .ci/apt/)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must provide every real component: {message}")
    pytest.skip(message)


REPO = Path(__file__).resolve().parents[1]


def h2iot(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """The controller's command line in a process of its own, output captured as text (rich
    tables 200 columns wide, so their lines do not wrap)."""
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def swept_ok(config: str, out: Path, *args: str) -> tuple[Path, list[dict[str, str]]]:
    """The run `h2iot sweep configs/CONFIG --no-dashboard --out OUT ARGS` left in OUT (which
    holds nothing else), and its rows, every one of them ok."""
    result = h2iot(
        "sweep", str(REPO / "configs" / config), "--no-dashboard", "--out", str(out), *args
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = out.iterdir()
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all(row["status"] == "ok" for row in rows), rows
    return run, rows


# A process of its own whose filesystem lacks what Debian installs in the sbin directories (the
# nghttp2 server, for one): a mount namespace with an empty directory over each, so a test sees
# a machine without them although this one has them. Needs unprivileged user namespaces.
_HIDE_SBIN = (
    'for d in /usr/local/sbin /usr/sbin; do /bin/mount --bind "$0" "$d" || exit 99; done; exec "$@"'
)


def without_sbin(argv: list[str], empty_dir: str) -> list[str]:
    """argv run where /usr/sbin (and /sbin, its link on Debian) and /usr/local/sbin are empty."""
    require_tool("unshare")
    unshare = str(shutil.which("unshare"))  # absolute: the test's own PATH may lack it
    return [
        unshare,
        "--user",
        "--map-root-user",
        "--mount",
        "/bin/sh",
        "-c",
        _HIDE_SBIN,
        empty_dir,
        *argv,
    ]


# The unprivileged user of tests that must run as one when the suite runs as root.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def as_ordinary_user(argv: list[str]) -> list[str]:
    """argv as this user when it is an ordinary one, else as nobody (who may read the worktree
    but not root's home: run it with an interpreter outside /root, like Debian's)."""
    if os.geteuid() != 0:
        return argv
    require_tool("setpriv")
    return [*NOBODY, *argv]
