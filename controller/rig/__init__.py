"""`h2iot rig check`: is the bench (the meter, its marker wire, the nodes) fit to measure?
Judgments in `checks` (pure), the I/O that feeds them in `probe` (the nodes, the Arduino
meter), `ppk2` (the PPK2's lines) and `bench` (what both meters' checks share)."""

from __future__ import annotations

from controller.rig.checks import Check, Status
from controller.rig.probe import check_rig

__all__ = ["Check", "Status", "check_rig"]
