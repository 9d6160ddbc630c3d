"""In CI (the environment variable CI set, as `.ci/run` does) a skipped test fails the run.

CI provides every real component the suite uses, so a skip there means an install step broke
or a test is hollow on that machine: the session's exit status becomes 1 and one line names each
skipped test with its reason. An expected failure (xfail) is not a skip. Loaded by
tests/conftest.py; `pytest -p tests.ci_guard` loads it alone (its own test does that).

One skip is accepted: CI runs part of the suite as an unprivileged user (tests/suite.py's
`unprivileged` part), where a test marked `root` is skipped with ROOT_SKIP (tests/conftest.py) and
runs as root in the other part. Only a test carrying the marker, skipped for that reason, by a
user who is not root, passes.
"""

from __future__ import annotations

import os

import pytest

_NAME = "h2iot-ci-guard"
ROOT_SKIP = "needs root"


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CI") and not config.pluginmanager.has_plugin(_NAME):
        config.pluginmanager.register(SkipGuard(), _NAME)


class SkipGuard:
    """Collects skips (of tests and of whole modules at collection) and fails the session."""

    def __init__(self) -> None:
        self.skipped: list[str] = []

    def _note(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        if (
            os.geteuid() != 0
            and getattr(report, "keywords", {}).get("root")  # a test's report, not a module's
            and str(reason).removeprefix("Skipped: ").startswith(ROOT_SKIP + ":")
        ):
            return
        self.skipped.append(f"{report.nodeid} ({str(reason).removeprefix('Skipped: ')})")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._note(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._note(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.skipped and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.skipped:
            terminalreporter.write_line(
                f"CI=true fails on skips: {len(self.skipped)} skipped: " + "; ".join(self.skipped),
                red=True,
            )
