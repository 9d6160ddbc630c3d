"""A workload is declared once (issue 26): its kind's name appears as a string literal only in
its own places, agent/workloads/<kind>/, controller/workloads/<kind>.py and
analysis/workloads/<kind>.py, and in the three registries that map kinds to those places.
Everything else asks a registry (`spec_of(kind)`, `report_of(kind)`) or uses DEFAULT_KIND, so
adding a workload touches no core file. Read from the code with `ast` (tests/_kinds.py)."""

from __future__ import annotations

from pathlib import Path

from agent.workloads import SPECS
from tests._kinds import REPO, kind_literals, stray_literals

REGISTRIES = frozenset(
    {
        "agent/workloads/__init__.py",
        "controller/workloads/__init__.py",
        "analysis/workloads/__init__.py",
    }
)
# Files whose literals only look like kinds, each with the reason.
NOT_KINDS = {
    "agent/site/text.py": "the words of the test page's generated prose ('stream', 'payload')",
}


def _owner(path: str) -> str | None:
    """The kind whose own place path is, if it is one."""
    parts = path.split("/")
    if parts[:2] == ["agent", "workloads"] and len(parts) > 3:
        return parts[2]
    if parts[0] in ("controller", "analysis") and parts[1:2] == ["workloads"] and len(parts) == 3:
        return parts[2].removesuffix(".py")
    return None


def _kind_literals(path: Path) -> list[tuple[int, str]]:
    return kind_literals(path, SPECS)


def test_a_kind_is_named_only_in_its_own_places_and_the_registries() -> None:
    stray = stray_literals(SPECS, _owner, REGISTRIES | NOT_KINDS.keys())
    assert not stray, "workload kinds named outside their own places:\n" + "\n".join(stray)


def test_the_rule_sees_a_kind_named_in_a_core_file(tmp_path: Path) -> None:
    core = tmp_path / "report.py"
    core.write_text('if run.workload == "blob":\n    pass\nWORDS = ("blobby",)\n')
    assert _kind_literals(core) == [(1, "blob")]
    assert _owner("analysis/workloads/blob.py") == "blob"
    assert _owner("agent/workloads/blob/spec.py") == "blob"
    assert _owner("controller/sweep/merge.py") is None
    assert _owner("agent/workloads/spec.py") is None


def test_every_exemption_is_still_needed() -> None:
    for name in NOT_KINDS:
        assert _kind_literals(REPO / name), f"{name} names no kind any more: drop its exemption"
