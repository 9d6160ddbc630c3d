"""`h2iot rig check`: is the bench (the meter, its marker wire, the nodes) fit to measure?
Judgments in `checks` (pure), the I/O that feeds them in `probe` (the nodes, then the meter's
lines through its source's declaration: controller/meter_sources/<name>/rig.py) and `bench`
(what every meter's check shares)."""

from __future__ import annotations

from controller.rig.checks import Check, Status
from controller.rig.probe import check_rig

__all__ = ["Check", "Status", "check_rig"]
