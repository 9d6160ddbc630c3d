"""A meter source is declared once (issue 35): its name appears as a string literal only in its
own folder, controller/meter_sources/<name>/, and in the registry that maps names to those
folders (controller/config/meter_sources.py). The config, the sweep's set-up, the rig check
and the CLI ask the registry (`spec_of(name)`, `MeterConfig.spec`) or use DEFAULT_SOURCE, so
adding a source touches no core file. Read from the code with `ast` (tests/_kinds.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from controller.config.meter_sources import BUILT_IN, SPECS, MeterSourceSpec
from tests._kinds import REPO, kind_literals, stray_literals

FOLDERS = "controller/meter_sources"
REGISTRY = "controller/config/meter_sources.py"
NAMES = frozenset(BUILT_IN)  # an installed source's name is no word of the project's
# Files whose literals name a source though they are no source's place, each with the reason.
# "serial" and "virtual" are ordinary words too; none is written alone outside its folder today.
NOT_SOURCES: dict[str, str] = {}


def _owner(path: str) -> str | None:
    """The source whose own folder path is in, if it is one."""
    parts = path.split("/")
    return parts[2] if "/".join(parts[:2]) == FOLDERS and len(parts) > 3 else None


def test_a_source_is_named_only_in_its_folder_and_the_registry() -> None:
    stray = stray_literals(NAMES, _owner, {REGISTRY, *NOT_SOURCES})
    assert not stray, "meter sources named outside their folders:\n" + "\n".join(stray)


def test_the_rule_sees_a_source_named_in_a_core_file(tmp_path: Path) -> None:
    core = tmp_path / "setup.py"
    core.write_text('if meter.source == "ppk2":\n    pass\nHELP = "a serial port"\n')
    assert kind_literals(core, NAMES) == [(1, "ppk2")]
    assert _owner("controller/meter_sources/ppk2/tap.py") == "ppk2"
    assert _owner("controller/meter_sources/board/tap.py") == "board"  # shared: names none
    assert _owner("controller/meter_sources/__init__.py") is None
    assert _owner("controller/sweep/setup.py") is None


def test_every_exemption_is_still_needed() -> None:
    for name in NOT_SOURCES:
        assert kind_literals(REPO / name, NAMES), f"{name} names no source any more: drop it"


@pytest.mark.parametrize("name", sorted(NAMES))
def test_a_built_in_source_is_declared_in_its_folder_and_everything_it_names_loads(
    name: str,
) -> None:
    spec = SPECS[name]
    assert type(spec).__module__ == MeterSourceSpec.__module__
    assert (REPO / FOLDERS / name / "spec.py").is_file()
    for dotted in (spec.tap, spec.rig_check):
        assert dotted is not None and callable(spec.load(dotted)), dotted
    for module in (spec.device, spec.cli, spec.emulator):
        if module is not None:
            importlib.import_module(module)
