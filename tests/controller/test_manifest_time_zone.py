"""The manifest names the controller's time zone, which the report writes its times in."""

from __future__ import annotations

import re

import pytest

from analysis.times import zone_of
from controller.cli.sweep import local_time_zone


def test_tz_names_the_zone_and_the_report_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert local_time_zone() == "Europe/Berlin"
    zone = zone_of({"time_zone": local_time_zone()}, "h2iot-20261203T150000")
    assert zone.name == "Europe/Berlin"


def test_without_tz_the_zone_is_the_systems_name_or_its_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TZ", raising=False)
    zone = local_time_zone()
    assert re.fullmatch(r"[A-Za-z_]+(/[A-Za-z0-9_+-]+)*|[+-]\d\d:\d\d", zone), zone
