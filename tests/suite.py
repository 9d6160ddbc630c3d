"""The whole test suite as `make test` (and, with `--coverage`, `make coverage` and CI) runs it:
in parts side by side, then the tests that need the machine to themselves, then one summary.

Parts, each a pytest session (pytest-xdist workers, one module per worker at a time so that a
module's set-up, its sweeps and servers, runs once):
- `main`: everything, as this user; as root, all but the tests of UNPRIVILEGED_PATHS not
  marked `root`, which run beside it in
- `unprivileged`: UNPRIVILEGED_PATHS as UNPRIVILEGED_USER (nobody), the way a Pi runs its
  agent (tests marked `root` skip there, saying so);
- `quiet`, after the others, alone: tests marked `quiet` (they calibrate a CPU quota, time a
  marker pulse, a window's effect on a fetch, or
  measure a link's rate or loss share, which other tests' load skews: beside niced parts they
  still failed, through disk and kernel work that CPU priority does not share). Not under
  coverage, which distorts what they time.

Tests marked `emulated` (the emulated Raspberry Pi OS nodes, whose roots take minutes to build)
are in none of these: `--emulated` runs them alone, as one part (`make test-emulated`).

The main part's output is shown as it runs; the others' when they end (a failure's details
then follow the main part's, whose own summary may come first). Then the suite's 15
slowest tests over every part (set-up, call and teardown together, from each part's JUnit XML)
and, with `--coverage`, the statement coverage per package (child processes included:
pyproject's [tool.coverage.run]). Exit status 0 when every part passed; a part that collects
no test at all is a failure (pytest's status 5), except a marker subset that is legitimately
empty. Options after `--` go to every part's pytest (`python -m tests.suite -- -k config`).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT_ONLY_IN

REPO = Path(__file__).resolve().parents[1]
UNPRIVILEGED_PATHS = ("tests/agent", "tests/analysis")
UNPRIVILEGED_USER = "nobody"
NO_TESTS = 5
SLOWEST = 15
PACKAGES = ("agent", "controller", "analysis")


def default_jobs() -> int:
    """Workers of the main part: one more than the cores, since most tests wait (on sweeps'
    idle baselines, on peers, on timeouts) more than they compute. Measured on a fresh 2-core
    machine (README): 2 workers 435 s for the main part, 3 354 s, 4 361-392 s with the load
    average at 10."""
    return max(2, (os.cpu_count() or 1) + 1)


@dataclass
class Part:
    name: str
    argv: list[str]
    env: dict[str, str]
    live: bool = False
    may_be_empty: bool = False
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    status: int | None = None
    started_s: float = field(default_factory=time.monotonic)
    took_s: float = 0.0


def _as_user(user: str) -> list[str]:
    ids = subprocess.run(["id", "-g", user], capture_output=True, text=True, check=True)
    return ["setpriv", f"--reuid={user}", f"--regid={ids.stdout.strip()}", "--clear-groups"]


def _user_can_run(prefix: list[str], env: dict[str, str]) -> bool:
    probe = [*prefix, "env", f"HOME={env['HOME']}", sys.executable, "-c", "pass"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


NOT_EMULATED = "not emulated"


class Suite:
    def __init__(self, scratch: Path, coverage: bool, jobs: int, extra: list[str]) -> None:
        self.scratch = scratch
        self.coverage = coverage
        self.jobs = jobs
        self.extra = extra

    def pytest(self, name: str, *args: str, workers: int = 0, measured: bool = True) -> list[str]:
        run = (
            [sys.executable, "-m", "coverage", "run"]
            if self.coverage and measured
            else [sys.executable]
        )
        parallel = ["-n", str(workers), "--dist", "loadscope"] if workers > 1 else []
        junit = f"--junitxml={self.scratch / f'{name}.xml'}"
        return [*run, "-m", "pytest", *parallel, junit, *args, *self.extra]

    def env(self, **more: str) -> dict[str, str]:
        env = {**os.environ, **more}
        if self.coverage:
            env["COVERAGE_FILE"] = str(self.scratch / "coverage" / ".coverage")
        return env

    def timed(self, name: str, marker: str) -> Part:
        """A part of the tests that time something: not under coverage, since a tracer in
        every process (and its start in every child Python, about 0.13 s of CPU) distorts what
        they measure."""
        argv = self.pytest(name, "-m", f"{marker} and {NOT_EMULATED}", measured=False)
        return Part(name, argv, {**os.environ}, may_be_empty=True)

    def emulated(self) -> Part:
        """The emulated nodes' tests, one module on one worker."""
        return Part("emulated", self.pytest("emulated", "-m", "emulated"), self.env(), live=True)

    def parts(self) -> list[Part]:
        """The parts, to run side by side."""
        not_quiet = ["-m", f"not quiet and {NOT_EMULATED}"]
        root = os.geteuid() == 0
        # As root, UNPRIVILEGED_PATHS' tests marked `root` stay in the main part (conftest.py).
        main = Part(
            "main",
            self.pytest("main", *not_quiet, workers=self.jobs),
            self.env(**({ROOT_ONLY_IN: ":".join(UNPRIVILEGED_PATHS)} if root else {})),
            live=True,
        )
        if not root:
            return [main]
        home = self.scratch / "home"
        home.mkdir()
        shutil.chown(home, UNPRIVILEGED_USER)
        prefix = _as_user(UNPRIVILEGED_USER)
        env = self.env(HOME=str(home))
        if _user_can_run(prefix, env):
            argv = [*prefix, *self.pytest("unprivileged", "-p", "no:cacheprovider",
                                          *not_quiet, *UNPRIVILEGED_PATHS,
                                          workers=max(2, self.jobs // 2))]  # fmt: skip
        else:
            message = (
                f"{UNPRIVILEGED_USER} cannot run {sys.executable}: make the venv with an "
                "interpreter outside /root (PYTHON=/usr/bin/python3)"
            )
            if os.environ.get("CI"):
                raise SystemExit(message)
            print(f"note: {message}; {', '.join(UNPRIVILEGED_PATHS)} run as root", flush=True)
            argv = self.pytest("unprivileged", *not_quiet, *UNPRIVILEGED_PATHS, workers=2)
        unprivileged = Part("unprivileged", argv, env)
        return [main, unprivileged]

    def start(self, part: Part) -> None:
        print(f"== {part.name}: {' '.join(part.argv)}", flush=True)
        part.started_s = time.monotonic()
        if part.live:
            part.process = subprocess.Popen(part.argv, env=part.env, cwd=REPO)
            return
        part.log = self.scratch / f"{part.name}.log"
        with part.log.open("wb") as log:
            part.process = subprocess.Popen(
                part.argv, env=part.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
            )

    def ended(self, part: Part) -> None:
        assert part.process is not None
        part.status = part.process.wait()
        part.took_s = time.monotonic() - part.started_s
        if part.status == NO_TESTS and part.may_be_empty:
            part.status = 0

    def show(self, part: Part) -> None:
        if part.log is not None:
            print(f"== {part.name} (its output; it took {part.took_s:.0f} s):", flush=True)
            sys.stdout.buffer.write(part.log.read_bytes())
            sys.stdout.flush()

    def run(self, parts: list[Part], after: Part | None = None) -> int:
        for part in parts:
            self.start(part)
        running = list(parts)
        while running:
            for part in [p for p in running if p.process and p.process.poll() is not None]:
                running.remove(part)
                self.ended(part)
            time.sleep(0.2)
        # After the live part's output, not inside it.
        for part in parts:
            self.show(part)
        if after is None:
            return summary(parts, self.scratch)
        self.start(after)
        self.ended(after)
        self.show(after)
        return summary([*parts, after], self.scratch)


def slowest(scratch: Path, count: int = SLOWEST) -> list[tuple[float, str]]:
    timed = []
    for report in scratch.glob("*.xml"):
        with contextlib.suppress(ET.ParseError):
            for case in ET.parse(report).iter("testcase"):
                name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
                timed.append((float(case.get("time", 0)), name))
    return sorted(timed, reverse=True)[:count]


def summary(parts: list[Part], scratch: Path) -> int:
    print(f"\n{SLOWEST} slowest tests of the suite (set-up, call and teardown):")
    for took_s, name in slowest(scratch):
        print(f"  {took_s:7.2f} s  {name}")
    print("parts:")
    for part in parts:
        verdict = {0: "passed", NO_TESTS: "collected no tests"}.get(part.status or 0, "failed")
        print(f"  {part.name:13} {verdict:18} {part.took_s:6.0f} s  (pytest status {part.status})")
    failed = [p for p in parts if p.status != 0]
    if any(p.status == NO_TESTS for p in failed):
        print("a part that collected no tests is a failure here", file=sys.stderr)
    return 1 if failed else 0


def report_coverage(scratch: Path) -> None:
    data = scratch / "coverage"
    combined = {**os.environ, "COVERAGE_FILE": str(REPO / ".coverage")}
    cov = [sys.executable, "-m", "coverage"]
    subprocess.run([*cov, "combine", "-q", str(data)], env=combined, cwd=REPO, check=True)
    print("coverage of statements, child processes included:")
    for package in (*PACKAGES, None):
        include = [f"--include={REPO / package}/*"] if package else []
        total = subprocess.run(
            [*cov, "report", *include, "--format=total"],
            env=combined, cwd=REPO, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        print(f"  {package or 'all':10} {total} %")


def compile_project(root: Path = REPO) -> None:
    """Compile the project's modules once, beside their sources. The part run as nobody cannot
    write __pycache__ into a root-owned checkout, and with PYTHONDONTWRITEBYTECODE set no one
    writes it: every agent, anchor and CLI process of every test would compile the project
    from source again (about 30 ms of CPU per agent trial here, more per controller CLI)."""
    for package in (*PACKAGES, "tests"):
        compileall.compile_dir(root / package, quiet=2, workers=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.suite", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--coverage", action="store_true", help="under coverage, then a line per package"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=int(os.environ.get("H2IOT_TEST_JOBS", default_jobs())),
        help="workers of the main part (default: %(default)s; H2IOT_TEST_JOBS)",
    )
    parser.add_argument(
        "--emulated",
        action="store_true",
        help="only the tests on emulated Raspberry Pi OS nodes (marked emulated)",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: given to every part's pytest")
    args = parser.parse_args(argv)  # fmt: skip
    started = time.monotonic()
    compile_project()
    scratch = Path(tempfile.mkdtemp(prefix="h2iot-suite."))
    # Every part's user writes its coverage data and reports here (some run as nobody).
    scratch.chmod(0o1777)
    (scratch / "coverage").mkdir(mode=0o1777)
    (scratch / "coverage").chmod(0o1777)
    try:
        suite = Suite(scratch, args.coverage, args.jobs, args.pytest_args)
        if args.emulated:
            status = suite.run([suite.emulated()])
        else:
            status = suite.run(suite.parts(), suite.timed("quiet", "quiet"))
        if args.coverage:
            report_coverage(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"suite: {time.monotonic() - started:.0f} s, {'passed' if status == 0 else 'FAILED'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
